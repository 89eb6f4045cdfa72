"""Bamba (IBM 2024) <-> zoo's `bamba` composition: a decoder-only hybrid of Mamba 2 layers and
softmax-attention layers, pre-norm RMSNorm, SwiGLU, RoPE over half of each head, no biases.

What transformers computes (`BambaForCausalLM`), and what it is in zoo:
- `attn_layer_indices`: the layers that are `BambaAttention` (grouped-query attention, RoPE
  rotating the first half of each head: `partial_rotary_factor` is fixed at 0.5 in its config,
  zoo's `model.position.rotary_fraction=0.5`); every other layer is `BambaMixer`, Mamba 2's SSD
  layer, zoo's `zoo.nn.mamba2.Mamba2` with the same parameter names (its rows are renamings).
  Indices that are every k-th layer (i + 1) % k == 0 are `model.attention=mamba2
  model.global_every=k`; none, `model.attention=mamba2` in every layer; others an explicit
  `model.layer_pattern` of `mamba2` and `full`;
- the mixer's widths: `mamba_n_heads` (model.ssm_heads), `mamba_d_head` (model.ssm_head_dim),
  `mamba_n_groups` (model.ssm_groups), `mamba_d_state` (model.ssm_state), `mamba_expand`
  (model.ssm_expand), `mamba_chunk_size` (model.ssm_chunk), `mamba_d_conv` (model.conv_kernel);
- `input_layernorm` before the mixer, `pre_ff_layernorm` before the SwiGLU unit
  (`feed_forward.{gate,up,down}_proj`), `final_layernorm`: zoo's pre-norm RMSNorms.

Refused on one line: biases on the attention, the feed-forward unit or the mixer's projections
(zoo's model.bias would add all of them), a convolution without its bias (zoo's always has one),
a clamp of dt (`time_step_limit` other than (0, inf)), an activation other than SiLU. Not
converted (a training-time setting): `z_loss_coefficient`."""

from __future__ import annotations

import math
from typing import Any

from zoo.config.facts.attention import AttentionKind, layer_mixer, layer_mixers
from zoo.config.facts.mamba2 import mamba2_dims
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, UnsupportedConfig, hf_rope, require, rope_position
from zoo.interop.hf.rope_decoder import FIELDS, LLAMA_BLOCK
from zoo.interop.hf.table import Composition, Family, Stack, Table, fields, row

MAMBA, FULL = AttentionKind.mamba2, AttentionKind.full
ROTARY_FRACTION = 0.5  # BambaConfig fixes partial_rotary_factor at 0.5
# the mixer's widths: zoo's model keys <-> transformers' config fields
SSM_FIELDS = fields(
    "ssm_heads mamba_n_heads",
    "ssm_head_dim mamba_d_head",
    "ssm_groups mamba_n_groups",
    "ssm_state mamba_d_state",
    "ssm_expand mamba_expand",
    "ssm_chunk mamba_chunk_size",
    "conv_kernel mamba_d_conv",
)
SSM_KEYS = tuple(f.zoo for f in SSM_FIELDS.rows)


def mamba_layer(cfg: ModelConfig, i: int) -> bool:
    """Is layer i of `cfg` a Mamba 2 layer?"""
    return layer_mixer(cfg, i) == MAMBA


def attention_layer(cfg: ModelConfig, i: int) -> bool:
    """Is layer i of `cfg` softmax attention?"""
    return not mamba_layer(cfg, i)


MIXER = (
    "in_proj.weight",
    "conv1d.weight",
    "conv1d.bias",
    "dt_bias",
    "A_log",
    "D",
    "norm.weight",
    "out_proj.weight",
)
LAYER = (
    row("self_attn.qkv_proj.weight", *(f"self_attn.{p}_proj.weight" for p in "qkv"), when=attention_layer),
    row("self_attn.o_proj.weight", "self_attn.o_proj.weight", when=attention_layer),
    *(row("self_attn." + name, "mamba." + name, when=mamba_layer) for name in MIXER),
    row("ff.w_in.weight", "feed_forward.gate_proj.weight", "feed_forward.up_proj.weight"),
    row("ff.w_out.weight", "feed_forward.down_proj.weight"),
    row("self_attn_sub.norm.weight", "input_layernorm.weight"),
    row("ff_sub.norm.weight", "pre_ff_layernorm.weight"),
)
TABLE = Table(
    embed="model.embed_tokens.weight",
    top=(row("decoder.final_norm.weight", "model.final_layernorm.weight"),),
    stacks=(Stack("decoder.layers.{i}.", "model.layers.{i}.", LAYER),),
)


def mixer_keys(config: Any) -> dict[str, Any]:
    """zoo's model.attention with model.global_every or model.layer_pattern of
    `attn_layer_indices`, and the mixer's widths where it has Mamba 2 layers."""
    name, n = type(config).__name__, config.num_hidden_layers
    full = sorted(set(config.attn_layer_indices or []))
    if any(not 0 <= i < n for i in full):
        raise UnsupportedConfig(f"{name}.attn_layer_indices={full} names layers outside 0..{n - 1}")
    if len(full) == n:
        return {"attention": FULL.value}
    every = next((k for k in range(2, n + 1) if full == [i for i in range(n) if (i + 1) % k == 0]), None)
    if not full:
        keys: dict[str, Any] = {"attention": MAMBA.value}
    elif every is not None:
        keys = {"attention": MAMBA.value, "global_every": every}
    else:
        keys = {"layer_pattern": [FULL.value if i in full else MAMBA.value for i in range(n)]}
    return {**keys, **SSM_FIELDS.read(config)}


def bamba_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", "silu")
    for flag in ("attention_bias", "mlp_bias", "mamba_proj_bias"):
        require(config, flag, False, "zoo's model.bias would add biases to every projection")
    require(config, "mamba_conv_bias", True, "zoo's Mamba 2 convolution always has its bias")
    limit = tuple(config.time_step_limit or (0.0, math.inf))
    if limit != (0.0, math.inf):
        raise UnsupportedConfig(
            f"{type(config).__name__}.time_step_limit={limit} is not supported (supported: (0.0, inf): dt not clamped)"
        )
    keys = {
        "position": rope_position(config, partial=True),
        "n_kv_heads": config.num_key_value_heads or config.num_attention_heads,
        "head_dim": config.hidden_size // config.num_attention_heads,
        "tie_embeddings": bool(config.tie_word_embeddings),
        **mixer_keys(config),
    }
    return LLAMA_BLOCK.keys(FIELDS.read(config), keys)


def bamba_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    d = mamba2_dims(cfg)
    return {
        **FIELDS.write(cfg),
        "num_key_value_heads": cfg.n_kv_heads,
        "hidden_act": "silu",
        "rope_parameters": {**hf_rope(cfg.position, cfg.max_seq_len), "partial_rotary_factor": ROTARY_FRACTION},
        "attn_layer_indices": [i for i in range(cfg.n_layers) if attention_layer(cfg, i)],
        "mamba_n_heads": d.heads,
        "mamba_d_head": d.head_dim,
        "mamba_n_groups": d.groups,
        "mamba_d_state": d.state,
        "mamba_expand": cfg.ssm_expand,
        "mamba_chunk_size": d.chunk,
        "mamba_d_conv": d.conv_kernel,
        "mamba_conv_bias": True,
        "mamba_proj_bias": False,
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }


def _mixers(cfg: ModelConfig) -> bool:
    """Mamba 2 layers (at least one) and full-attention layers, and the head width Bamba derives."""
    kinds = set(layer_mixers(cfg, cfg.n_layers))
    return MAMBA in kinds and kinds <= {MAMBA, FULL} and cfg.head_dim * cfg.n_heads == cfg.d_model


NAMES = ("bamba", "BambaForCausalLM", "BambaConfig")
DESCRIPTION = (
    "bamba: decoder-only, mamba2 layers with full-attention layers among them (global_every or layer_pattern), "
    "rope over half of each head, pre-norm rmsnorm, swiglu, no biases"
)
COMPOSITION = Composition(
    "decoder_only",
    "rope",
    "pre",
    "rmsnorm",
    "swiglu",
    options={
        "rotary_fraction": (ROTARY_FRACTION,),
        "attention": ANY,
        "global_every": ANY,
        "layer_pattern": ANY,
        **{key: ANY for key in SSM_KEYS},
    },
    checks=(_mixers,),
)
BAMBA = Family(NAMES, DESCRIPTION, COMPOSITION, (bamba_keys, bamba_hf_keys), TABLE)
