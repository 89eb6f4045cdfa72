"""GPT-NeoX (Black et al. 2022; Pythia) <-> zoo's decoder-only composition with RoPE, pre-LN
LayerNorm, a plain GELU (or ReLU) feed-forward and biases everywhere; attention and
feed-forward in parallel from two norms (`use_parallel_residual`: x + attn(norm1(x)) +
ff(norm2(x)), zoo's `model.block=parallel_two_norms`) or one after the other (`model.block=
sequential`).

GPT-NeoX fuses q, k, v into one `query_key_value` whose rows run head by head (for each head its
Dh query rows, then key rows, then value rows); zoo's `qkv_proj` has all query rows, then all
key rows, then all value rows: the rows are permuted on the way in and out. RoPE pairs
dimensions as rotate-half, as zoo does, but GPT-NeoX rotates only `partial_rotary_factor` of
each head (`rotary_pct`, 0.25 by default, as in Pythia); zoo rotates the whole head, so a
fraction other than 1.0 is refused."""

from __future__ import annotations

from typing import Any

import torch

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ACTIVATIONS, HF_ACTIVATIONS, hf_rope, require, rope_of
from zoo.interop.hf.table import (
    WB,
    Family,
    Stack,
    Table,
    Transform,
    fields,
    heads_span_model,
    one_kv_per_head,
    read_fields,
    row,
    write_fields,
)

BLOCKS = {True: "parallel_two_norms", False: "sequential"}  # use_parallel_residual -> model.block
FIELDS = fields(
    "d_model hidden_size",
    "n_heads num_attention_heads",
    "n_layers num_hidden_layers",
    "d_ff intermediate_size",
    "vocab_size vocab_size",
    "max_seq_len max_position_embeddings",
    "norm_eps layer_norm_eps",
    "tie_embeddings tie_word_embeddings",
)


def by_kind(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """GPT-NeoX's head-by-head (q, k, v) rows -> zoo's q rows, k rows, v rows; t (3·H·Dh, ...)."""
    return t.reshape(n_heads, 3, -1, *t.shape[1:]).transpose(0, 1).reshape(t.shape)  # (H, 3, Dh, ...) -> (3, H, ...)


def by_head(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of `by_kind`: zoo's q, k, v rows -> GPT-NeoX's head by head."""
    return t.reshape(3, n_heads, -1, *t.shape[1:]).transpose(0, 1).reshape(t.shape)  # (3, H, Dh, ...) -> (H, 3, ...)


HEAD_BY_HEAD = Transform("head_by_head", lambda t, cfg: by_kind(t, cfg.n_heads), lambda t, cfg: by_head(t, cfg.n_heads))
TABLE = Table(
    top=(
        row("embed.weight", "gpt_neox.embed_in.weight"),
        row("lm_head.weight", "lm_head.weight"),
        row("decoder.final_norm", "gpt_neox.final_layer_norm", suffixes=WB),
    ),
    stacks=(
        Stack(
            "decoder.layers.{i}.",
            "gpt_neox.layers.{i}.",
            (
                row("self_attn_sub.norm", "input_layernorm", suffixes=WB),
                row("ff_sub.norm", "post_attention_layernorm", suffixes=WB),
                row("self_attn.qkv_proj", "attention.query_key_value", transform=HEAD_BY_HEAD, suffixes=WB),
                row("self_attn.o_proj", "attention.dense", suffixes=WB),
                row("ff.w_in", "mlp.dense_h_to_4h", suffixes=WB),
                row("ff.w_out", "mlp.dense_4h_to_h", suffixes=WB),
            ),
        ),
    ),
    aliases={"lm_head.weight": "gpt_neox.embed_in.weight"},  # tied: saved once
)


def neox_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", tuple(ACTIVATIONS))
    require(config, "attention_bias", (True, None), "zoo's biases are on every projection or none")
    theta, scale = rope_of(config)
    return {
        "family": "decoder_only",
        "position": {"kind": "rope", "theta": theta, "scale": scale},
        "norm": "pre",
        "norm_type": "layernorm",
        "activation": ACTIVATIONS[config.hidden_act],
        "block": BLOCKS[bool(config.use_parallel_residual)],
        **read_fields(config, FIELDS),
        "dropout": 0.0,
        "tie_embeddings": bool(config.tie_word_embeddings),
        "bias": True,
    }


def neox_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return {
        **write_fields(cfg, FIELDS),
        "hidden_act": HF_ACTIVATIONS[cfg.activation.value],
        "use_parallel_residual": cfg.block.value == "parallel_two_norms",
        "rope_parameters": {**hf_rope(cfg.position), "partial_rotary_factor": 1.0},
        "attention_bias": True,
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }


GPT_NEOX = Family(
    model_type="gpt_neox",
    description=(
        "gpt_neox: decoder-only, rope over the whole head, pre-LN layernorm, gelu/gelu_tanh/relu, "
        "biases, parallel (two norms) or sequential block"
    ),
    model_class="GPTNeoXForCausalLM",
    config_class="GPTNeoXConfig",
    composition={
        "family": "decoder_only",
        "position": "rope",
        "norm": "pre",
        "norm_type": "layernorm",
        "activation": tuple(HF_ACTIVATIONS),
    },
    options={"block": tuple(BLOCKS.values())},
    bias=True,
    checks=(one_kv_per_head, heads_span_model),
    zoo_keys=neox_keys,
    hf_keys=neox_hf_keys,
    table=lambda cfg: TABLE,
)
