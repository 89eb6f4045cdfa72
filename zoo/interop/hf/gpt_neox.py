"""GPT-NeoX (Black et al. 2022; Pythia) <-> zoo's decoder-only composition with RoPE, pre-LN
LayerNorm, a plain GELU (or ReLU) feed-forward and biases everywhere; attention and
feed-forward in parallel from two norms (`use_parallel_residual`: x + attn(norm1(x)) +
ff(norm2(x)), zoo's `model.block=parallel_two_norms`) or one after the other (`model.block=
sequential`).

GPT-NeoX fuses q, k, v into one `query_key_value` whose rows run head by head (for each head its
Dh query rows, then key rows, then value rows); zoo's `qkv_proj` has all query rows, then all
key rows, then all value rows: the rows are permuted on the way in and out. RoPE pairs
dimensions as rotate-half, as zoo does, but GPT-NeoX rotates only `partial_rotary_factor` of
each head (`rotary_pct`, 0.25 by default, as in Pythia): zoo's `model.position.rotary_fraction`."""

from __future__ import annotations

from typing import Any

import torch

from zoo.config.schema.model import BlockKind, ModelConfig
from zoo.interop.hf.common import ACTIVATIONS, ACTIVATIONS_LISTED, ANY, HF_ACTIVATIONS, hf_rope, require, rope_position
from zoo.interop.hf.table import FULL_HEADS, HIDDEN_FIELDS, WB, Composition, Family, Stack, Table, Transform, row

BLOCKS = {True: "parallel_two_norms", False: "sequential"}  # use_parallel_residual -> model.block
COMPOSITION = Composition(
    "decoder_only",
    "rope",
    "pre",
    "layernorm",
    tuple(HF_ACTIVATIONS),
    True,
    {"block": tuple(BLOCKS.values()), "rotary_fraction": ANY},
    FULL_HEADS,
)
FIELDS = HIDDEN_FIELDS.extended("norm_eps layer_norm_eps")


def by_kind(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """GPT-NeoX's head-by-head (q, k, v) rows -> zoo's q rows, k rows, v rows; t (3·H·Dh, ...)."""
    return t.reshape(n_heads, 3, -1, *t.shape[1:]).transpose(0, 1).reshape(t.shape)  # (H, 3, Dh, ...) -> (3, H, ...)


def by_head(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of `by_kind`: zoo's q, k, v rows -> GPT-NeoX's head by head."""
    return t.reshape(3, n_heads, -1, *t.shape[1:]).transpose(0, 1).reshape(t.shape)  # (3, H, Dh, ...) -> (H, 3, ...)


HEAD_BY_HEAD = Transform("head_by_head", lambda t, cfg: by_kind(t, cfg.n_heads), lambda t, cfg: by_head(t, cfg.n_heads))
LAYER = (
    row("self_attn_sub.norm", "input_layernorm", suffixes=WB),
    row("ff_sub.norm", "post_attention_layernorm", suffixes=WB),
    row("self_attn.qkv_proj", "attention.query_key_value", transform=HEAD_BY_HEAD, suffixes=WB),
    row("self_attn.o_proj", "attention.dense", suffixes=WB),
    row("ff.w_in", "mlp.dense_h_to_4h", suffixes=WB),
    row("ff.w_out", "mlp.dense_4h_to_h", suffixes=WB),
)
TABLE = Table(
    embed="gpt_neox.embed_in.weight",
    top=(row("decoder.final_norm", "gpt_neox.final_layer_norm", suffixes=WB),),
    stacks=(Stack("decoder.layers.{i}.", "gpt_neox.layers.{i}.", LAYER),),
)


def neox_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", tuple(ACTIVATIONS))
    require(config, "attention_bias", (True, None), "zoo's biases are on every projection or on none")
    position = rope_position(config, partial=True)
    return COMPOSITION.keys(
        FIELDS.read(config),
        position=position,
        activation=ACTIVATIONS[config.hidden_act],
        block=BLOCKS[bool(config.use_parallel_residual)],
        tie_embeddings=bool(config.tie_word_embeddings),
    )


def neox_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return {
        **FIELDS.write(cfg),
        "hidden_act": HF_ACTIVATIONS[cfg.activation.value],
        "use_parallel_residual": cfg.block.value == "parallel_two_norms",
        "rope_parameters": {
            **hf_rope(cfg.position, cfg.max_seq_len),
            "partial_rotary_factor": cfg.position.rotary_fraction,
        },
        "attention_bias": True,
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }


NAMES = ("gpt_neox", "GPTNeoXForCausalLM", "GPTNeoXConfig")
DESCRIPTION = (
    f"gpt_neox: decoder-only, rope over all or the first part of each head, pre-LN layernorm, {ACTIVATIONS_LISTED}, biases, "
    f"{BlockKind.parallel_two_norms.value} or {BlockKind.sequential.value} block"
)
GPT_NEOX = Family(NAMES, DESCRIPTION, COMPOSITION, (neox_keys, neox_hf_keys), TABLE)
