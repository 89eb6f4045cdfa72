"""GPT-2 (Radford et al. 2019) <-> zoo's `gpt` composition with `activation=gelu_tanh`:
decoder-only, learned positions, pre-LN LayerNorm, biases everywhere, tied embeddings.

GPT-2 stores its projections as `Conv1D` with (in, out) weights: their rows are `TRANSPOSE`d
on the way in and out. Its fused `c_attn` holds q, k, v in zoo's order."""

from __future__ import annotations

from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import HF_ACTIVATIONS, require
from zoo.interop.hf.table import (
    TRANSPOSE,
    WB,
    Family,
    Stack,
    Table,
    fields,
    heads_span_model,
    one_kv_per_head,
    read_fields,
    row,
    tied_embeddings,
    write_fields,
)

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
FIELDS = fields(
    "d_model n_embd",
    "n_heads n_head",
    "n_layers n_layer",
    "vocab_size vocab_size",
    "max_seq_len n_positions",
    "norm_eps layer_norm_epsilon",
)
TABLE = Table(
    top=(
        row("embed.weight", "transformer.wte.weight"),
        row("lm_head.weight", "lm_head.weight"),
        row("decoder.positions.0.table.weight", "transformer.wpe.weight"),
        row("decoder.final_norm", "transformer.ln_f", suffixes=WB),
    ),
    stacks=(
        Stack(
            "decoder.layers.{i}.",
            "transformer.h.{i}.",
            (
                row("self_attn.qkv_proj.weight", "attn.c_attn.weight", transform=TRANSPOSE),
                row("self_attn.qkv_proj.bias", "attn.c_attn.bias"),
                row("self_attn.o_proj.weight", "attn.c_proj.weight", transform=TRANSPOSE),
                row("self_attn.o_proj.bias", "attn.c_proj.bias"),
                row("ff.w_in.weight", "mlp.c_fc.weight", transform=TRANSPOSE),
                row("ff.w_in.bias", "mlp.c_fc.bias"),
                row("ff.w_out.weight", "mlp.c_proj.weight", transform=TRANSPOSE),
                row("ff.w_out.bias", "mlp.c_proj.bias"),
                row("self_attn_sub.norm", "ln_1", suffixes=WB),
                row("ff_sub.norm", "ln_2", suffixes=WB),
            ),
        ),
    ),
    aliases={"lm_head.weight": "transformer.wte.weight"},  # tied: one tensor
)


def gpt2_keys(config: Any) -> dict[str, Any]:
    require(config, "activation_function", tuple(ACTIVATIONS))
    require(config, "scale_attn_weights", True)
    require(config, "scale_attn_by_inverse_layer_idx", (False, None))
    require(config, "add_cross_attention", (False, None))
    require(config, "tie_word_embeddings", (True, None), "zoo's GPT-2 ties its output to the embedding")
    return {
        "family": "decoder_only",
        "position": {"kind": "learned"},
        "norm": "pre",
        "norm_type": "layernorm",
        "activation": ACTIVATIONS[config.activation_function],
        **read_fields(config, FIELDS),
        "d_ff": config.n_inner or 4 * config.n_embd,
        "dropout": 0.0,
        "tie_embeddings": True,
        "bias": True,
    }


def gpt2_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return {
        **write_fields(cfg, FIELDS),
        "n_inner": cfg.d_ff,
        "activation_function": HF_ACTIVATIONS[cfg.activation.value],
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": None,
    }


GPT2 = Family(
    model_type="gpt2",
    description="gpt2: decoder-only, learned positions, pre-LN layernorm, relu/gelu/gelu_tanh, biases, tied",
    model_class="GPT2LMHeadModel",
    config_class="GPT2Config",
    composition={
        "family": "decoder_only",
        "position": "learned",
        "norm": "pre",
        "norm_type": "layernorm",
        "activation": tuple(HF_ACTIVATIONS),
    },
    bias=True,
    checks=(tied_embeddings, one_kv_per_head, heads_span_model),
    zoo_keys=gpt2_keys,
    hf_keys=gpt2_hf_keys,
    table=lambda cfg: TABLE,
)
