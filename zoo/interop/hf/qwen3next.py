"""Qwen3-Next (Qwen team 2025) <-> zoo's `qwen3_next` composition: decoder-only, RoPE over part of
each head, pre-norm zero-centred RMSNorm, gated attention with QK-norm per head, Gated DeltaNet
layers between the full-attention ones, and a mixture of SwiGLU experts with a gated shared expert.

What transformers computes (`Qwen3NextForCausalLM`), and what it is in zoo:
- every RMSNorm (the layers' two, the final one, q_norm and k_norm) is x/rms(x)·(1 + w), its
  weight w stored zero-centred: zoo's RMSNorm with weight w + 1 (`PLUS_ONE`); the Gated
  DeltaNet's own gated norm is x/rms(x)·w and maps as it is;
- `Qwen3NextAttention`: `model.attn_gate=elementwise model.qk_norm=head` (the gate fused into
  q_proj: `zoo.interop.hf.query_gate`, the row `QUERY_GATE` below), RoPE rotating the first
  int(Dh·partial_rotary_factor) dimensions of each head: `model.position.rotary_fraction`;
- `layer_types`: "linear_attention" layers are Gated DeltaNet (`Qwen3NextGatedDeltaNet`,
  zoo's `GatedDeltaNet` with the same parameter names, so its rows are renamings), the
  "full_attention" ones softmax attention; made from `full_attention_interval` k as the layers
  with (i + 1) % k == 0 full: zoo's `model.attention=gated_deltanet model.global_every=k`. A
  config whose layers are all full attention (full_attention_interval=1) is `model.attention=full`;
- `Qwen3NextSparseMoeBlock` in the layers with (i + 1) % decoder_sparse_step == 0 outside
  `mlp_only_layers`: softmax router, top k renormalised with `norm_topk_prob`
  (`model.moe_renorm`), experts `moe_intermediate_size` wide (`zoo.interop.hf.experts`' layout),
  and one shared expert `shared_expert_intermediate_size` wide scaled by
  sigmoid(`shared_expert_gate`(x)): `model.moe_shared` experts of the expert width with
  `model.moe_shared_gate=sigmoid`; decoder_sparse_step is `model.moe_every`, mlp_only_layers the
  first `model.moe_first_dense` layers; the other layers are SwiGLU units `intermediate_size`
  wide (`model.d_ff`); `num_experts=0`: every layer dense (`model.ffn=dense`).

Refused on one line: attention biases (zoo's model.bias would add them to the feed-forward units
too), a shared expert width that is not a multiple of the experts', dense layers outside zoo's
pattern, a layer pattern that is no full_attention_interval, and linear-attention layers where
zoo has no `gated_deltanet` kind. Not converted (training-time settings): `router_aux_loss_coef`
(zoo's `task.moe_balance`), the multi-token prediction weights of a checkpoint (`mtp.*`)."""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from typing import Any

import torch

from zoo.config.facts.attention import AttentionKind
from zoo.config.facts.ffn import FFNKind, expert_width
from zoo.config.facts.gated_deltanet import key_dim, key_heads, value_dim, value_heads
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, OPTIONS, UnsupportedConfig, hf_rope, require, rope_position
from zoo.interop.hf.experts import dense_layer, moe_layer
from zoo.interop.hf.query_gate import join_query_gate, split_query_gate
from zoo.interop.hf.rope_decoder import FIELDS, LLAMA_BLOCK
from zoo.interop.hf.table import IDENTITY, PLUS_ONE, Composition, Family, Row, Stack, Table, Transform, fields, row

RECURRENT = "gated_deltanet"  # zoo's model.attention of Qwen3-Next's linear-attention layers
FULL, LINEAR = "full_attention", "linear_attention"  # transformers' layer_types
MIXER = "self_attn."  # the zoo module of a layer's token mixer, softmax attention or Gated DeltaNet
# the Gated DeltaNet's widths: zoo's model keys <-> transformers' config fields
LINEAR_FIELDS = fields(
    "linear_key_heads linear_num_key_heads",
    "linear_value_heads linear_num_value_heads",
    "linear_key_dim linear_key_head_dim",
    "linear_value_dim linear_value_head_dim",
    "conv_kernel linear_conv_kernel_dim",
)


# the Gated DeltaNet's widths among the model's keys (none where zoo has no such mixer)
LINEAR_KEYS = tuple(f.zoo for f in LINEAR_FIELDS.rows if f.zoo in {key.name for key in dataclass_fields(ModelConfig)})


def recurrent_layer(cfg: ModelConfig, i: int) -> bool:
    """Is layer i of `cfg` a Gated DeltaNet layer (model.attention=gated_deltanet, outside every
    model.global_every-th)?"""
    return cfg.attention.value == RECURRENT and (cfg.global_every is None or (i + 1) % cfg.global_every != 0)


def attention_layer(cfg: ModelConfig, i: int) -> bool:
    """Is layer i of `cfg` softmax attention?"""
    return not recurrent_layer(cfg, i)


def layer_types(cfg: ModelConfig) -> list[str]:
    """transformers' layer_types of `cfg`'s layers."""
    return [LINEAR if recurrent_layer(cfg, i) else FULL for i in range(cfg.n_layers)]


def _to_zoo_query_gate(t: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """cat(q_proj (H·2·Dh), k_proj, v_proj) -> cat(q (H·Dh), k, v, gate (H·Dh)): qkv_proj, then gate.proj."""
    rows = 2 * cfg.n_heads * cfg.head_dim
    query, gate = split_query_gate(t[:rows], cfg.n_heads, cfg.head_dim)  # (H·Dh, ...) each
    return torch.cat([query, t[rows:], gate])


def _to_hf_query_gate(t: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """The inverse of `_to_zoo_query_gate`."""
    rows = cfg.n_heads * cfg.head_dim
    query, kv, gate = t[:rows], t[rows:-rows], t[-rows:]
    return torch.cat([join_query_gate(query, gate, cfg.n_heads, cfg.head_dim), kv])


# q_proj (each head's query rows, then its gate rows), k_proj, v_proj <-> qkv_proj and gate.proj
QUERY_GATE = Transform("query_gate", _to_zoo_query_gate, _to_hf_query_gate)


def shared_layer(cfg: ModelConfig, i: int) -> bool:
    """Does layer i hold the gated shared expert (every mixture layer of the family does)?"""
    return moe_layer(cfg, i) and cfg.moe_shared > 0


def _mixer(name: str, plus_one: bool = False) -> Row:
    return row(
        MIXER + name,
        "self_attn." + name,
        transform=PLUS_ONE if plus_one else IDENTITY,
        when=attention_layer,
    )


ATTENTION = (
    row(
        MIXER + "qkv_proj.weight",
        *(f"self_attn.{p}_proj.weight" for p in "qkv"),
        transform=QUERY_GATE,
        joins=(MIXER + "gate.proj.weight",),
        when=attention_layer,
    ),
    _mixer("o_proj.weight"),
    _mixer("q_norm.weight", plus_one=True),
    _mixer("k_norm.weight", plus_one=True),
)
# Gated DeltaNet: the same names in zoo (its GatedDeltaNet module) and transformers
GATED_DELTANET = tuple(
    row(MIXER + name, "linear_attn." + name, when=recurrent_layer)
    for name in (
        "in_proj_qkvz.weight",
        "in_proj_ba.weight",
        "conv1d.weight",
        "dt_bias",
        "A_log",
        "norm.weight",
        "out_proj.weight",
    )
)
FFN = (
    row("ff.w_in.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", when=dense_layer),
    row("ff.w_out.weight", "mlp.down_proj.weight", when=dense_layer),
    row("ff.router.weight", "mlp.gate.weight", when=moe_layer),  # (E, D)
    row("ff.experts.w_in", "mlp.experts.gate_up_proj", when=moe_layer),  # (E, 2·F, D): gate rows, then up rows
    row("ff.experts.w_out", "mlp.experts.down_proj", when=moe_layer),  # (E, D, F)
    row(
        "ff.shared.w_in.weight",
        "mlp.shared_expert.gate_proj.weight",
        "mlp.shared_expert.up_proj.weight",
        when=shared_layer,
    ),  # (2·S·F, D)
    row("ff.shared.w_out.weight", "mlp.shared_expert.down_proj.weight", when=shared_layer),  # (D, S·F)
    row("ff.shared_gate.weight", "mlp.shared_expert_gate.weight", when=shared_layer),  # (1, D)
)
NORMS = (
    row("self_attn_sub.norm.weight", "input_layernorm.weight", transform=PLUS_ONE),
    row("ff_sub.norm.weight", "post_attention_layernorm.weight", transform=PLUS_ONE),
)
TABLE = Table(
    embed="model.embed_tokens.weight",
    top=(row("decoder.final_norm.weight", "model.norm.weight", transform=PLUS_ONE),),
    stacks=(Stack("decoder.layers.{i}.", "model.layers.{i}.", ATTENTION + GATED_DELTANET + FFN + NORMS),),
)


def mixer_keys(config: Any) -> dict[str, Any]:
    """zoo's model.attention and model.global_every of `layer_types` (and the Gated DeltaNet's
    widths where it has such layers)."""
    name, kinds = type(config).__name__, list(config.layer_types)
    if all(kind == FULL for kind in kinds):
        return {"attention": AttentionKind.full.value}
    n = config.num_hidden_layers
    every = next(
        (
            k
            for k in (None, *range(2, n + 1))
            if kinds == [FULL if k and (i + 1) % k == 0 else LINEAR for i in range(n)]
        ),
        0,
    )
    if every == 0:
        raise UnsupportedConfig(
            f"{name}.layer_types={kinds} is not supported (supported: the pattern of a full_attention_interval k, "
            f"the layers i with (i + 1) % k == 0 {FULL!r}, the others {LINEAR!r})"
        )
    return {"attention": RECURRENT, "global_every": every, **LINEAR_FIELDS.read(config)}


def ffn_keys(config: Any) -> dict[str, Any]:
    """zoo's model.ffn and model.moe_* keys of the mixture's fields: which layers are mixtures
    (decoder_sparse_step, mlp_only_layers), the router and the gated shared expert."""
    name, n = type(config).__name__, config.num_hidden_layers
    every, only = config.decoder_sparse_step, sorted(config.mlp_only_layers or [])
    mixtures = [config.num_experts > 0 and i not in only and (i + 1) % every == 0 for i in range(n)]
    if not any(mixtures):
        return {"ffn": FFNKind.dense.value}
    first = next((k for k in range(n) if mixtures == [i >= k and (i + 1) % every == 0 for i in range(n)]), None)
    if first is None:
        raise UnsupportedConfig(
            f"{name}.mlp_only_layers={only} is not supported (supported: the first k layers, "
            "zoo's model.moe_first_dense, or none); zoo's other dense layers are those outside every decoder_sparse_step-th"
        )
    width, shared = config.moe_intermediate_size, config.shared_expert_intermediate_size
    if shared < width or shared % width:
        raise UnsupportedConfig(
            f"{name}.shared_expert_intermediate_size={shared} is not supported (supported: a positive multiple of "
            f"moe_intermediate_size={width}); zoo's shared experts are model.moe_shared units model.moe_d_ff wide"
        )
    return {
        "ffn": FFNKind.moe.value,
        "moe_experts": config.num_experts,
        "moe_top_k": config.num_experts_per_tok,
        "moe_renorm": bool(config.norm_topk_prob),
        "moe_d_ff": width,
        "moe_shared": shared // width,
        "moe_shared_gate": "sigmoid",
        "moe_every": every,
        "moe_first_dense": first,
    }


def qwen3_next_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", "silu")
    require(config, "attention_bias", False, "zoo's model.bias would add biases to the feed-forward units too")
    keys = {
        "position": rope_position(config, partial=True),
        "n_kv_heads": config.num_key_value_heads or config.num_attention_heads,
        "head_dim": config.head_dim or config.hidden_size // config.num_attention_heads,
        "tie_embeddings": bool(config.tie_word_embeddings),
        "qk_norm": "head",
        "attn_gate": "elementwise",
        **mixer_keys(config),
        **ffn_keys(config),
    }
    return LLAMA_BLOCK.keys(FIELDS.read(config), keys)


def linear_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    """transformers' Gated DeltaNet widths of `cfg`, those left null derived as the model derives
    them (`zoo.config.facts.gated_deltanet`)."""
    return {
        **LINEAR_FIELDS.write(cfg),
        "linear_num_key_heads": key_heads(cfg),
        "linear_num_value_heads": value_heads(cfg),
        "linear_key_head_dim": key_dim(cfg),
        "linear_value_head_dim": value_dim(cfg),
    }


def qwen3_next_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    moe = cfg.ffn == FFNKind.moe
    width = expert_width(cfg, cfg.d_ff)
    experts = {
        "num_experts": cfg.moe_experts if moe else 0,
        "num_experts_per_tok": cfg.moe_top_k,
        "norm_topk_prob": cfg.moe_renorm,
        "moe_intermediate_size": width,
        "shared_expert_intermediate_size": cfg.moe_shared * width if moe else width,
        "decoder_sparse_step": cfg.moe_every,
        "mlp_only_layers": list(range(cfg.moe_first_dense)),
    }
    recurrent = any(recurrent_layer(cfg, i) for i in range(cfg.n_layers))
    return {
        **FIELDS.write(cfg),
        **experts,
        **(linear_hf_keys(cfg) if recurrent else {}),
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rope_parameters": {
            **hf_rope(cfg.position, cfg.max_seq_len),
            "partial_rotary_factor": cfg.position.rotary_fraction,
        },
        "layer_types": layer_types(cfg),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }


def _mixers(cfg: ModelConfig) -> bool:
    """Softmax attention in every layer, or Gated DeltaNet layers with every model.global_every-th full."""
    return cfg.attention.value == RECURRENT or (cfg.attention == AttentionKind.full and cfg.global_every is None)


# the mixture's keys a dense Qwen3-Next leaves at their defaults (`common.OPTIONS`)
MOE_KEYS = ("moe_experts", "moe_top_k", "moe_d_ff", "moe_shared", "moe_renorm", "moe_every", "moe_first_dense")


def _ffn(cfg: ModelConfig) -> bool:
    """Dense layers with the mixture's keys at their defaults, or Qwen3-Next's mixture: a
    softmax router, dropless, with shared experts behind the sigmoid gate."""
    if cfg.ffn == FFNKind.dense:
        return all(getattr(cfg, key) in OPTIONS[key] for key in MOE_KEYS)
    return cfg.moe_shared >= 1 and cfg.moe_shared_gate.value == "sigmoid"


NAMES = ("qwen3_next", "Qwen3NextForCausalLM", "Qwen3NextConfig")
DESCRIPTION = (
    "qwen3_next: decoder-only, partial rope, pre-norm zero-centred rmsnorm, swiglu, gated attention with qk-norm "
    "per head (gated deltanet layers between every k-th), dense layers or a mixture with a gated shared expert, "
    "no biases"
)
COMPOSITION = Composition(
    "decoder_only",
    "rope",
    "pre",
    "rmsnorm",
    "swiglu",
    options={
        "qk_norm": ("head",),
        "qk_norm_type": (None, "rmsnorm"),
        "attn_gate": ("elementwise",),
        "rotary_fraction": ANY,
        "attention": ANY,
        "global_every": ANY,
        "ffn": tuple(kind.value for kind in FFNKind),
        **{key: ANY for key in MOE_KEYS},
        "moe_shared_gate": ANY,
        **{key: ANY for key in LINEAR_KEYS},
    },
    checks=(_mixers, _ffn),
)
QWEN3_NEXT = Family(NAMES, DESCRIPTION, COMPOSITION, (qwen3_next_keys, qwen3_next_hf_keys), TABLE)
