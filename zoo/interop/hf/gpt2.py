"""GPT-2 (Radford et al. 2019) <-> zoo's `gpt` composition with `activation=gelu_tanh`:
decoder-only, learned positions, pre-LN LayerNorm, biases everywhere, tied embeddings.

GPT-2 stores its projections as `Conv1D` with (in, out) weights: they are transposed on the
way in and out (`CONV1D`). Its fused `c_attn` holds q, k, v in zoo's order."""

from __future__ import annotations

from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ACTIVATIONS_LISTED, HF_ACTIVATIONS, require
from zoo.interop.hf.table import (
    FULL_HEADS,
    WB,
    Composition,
    Family,
    Stack,
    Table,
    Transform,
    fields,
    row,
    tied_embeddings,
)

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
COMPOSITION = Composition(
    "decoder_only", "learned", "pre", "layernorm", tuple(HF_ACTIVATIONS), True, checks=(tied_embeddings, *FULL_HEADS)
)
FIELDS = fields(
    "d_model n_embd",
    "n_heads n_head",
    "n_layers n_layer",
    "vocab_size vocab_size",
    "max_seq_len n_positions",
    "norm_eps layer_norm_epsilon",
)
# Conv1D stores a weight (in, out) where zoo's Linear holds (out, in); its bias is as it is
CONV1D = Transform(
    "conv1d",
    lambda t, cfg: t.t() if t.dim() == 2 else t,
    lambda t, cfg: t.t().contiguous() if t.dim() == 2 else t,
)
LAYER = (
    row("self_attn.qkv_proj", "attn.c_attn", transform=CONV1D, suffixes=WB),  # q, k, v in zoo's order
    row("self_attn.o_proj", "attn.c_proj", transform=CONV1D, suffixes=WB),
    row("ff.w_in", "mlp.c_fc", transform=CONV1D, suffixes=WB),
    row("ff.w_out", "mlp.c_proj", transform=CONV1D, suffixes=WB),
    row("self_attn_sub.norm", "ln_1", suffixes=WB),
    row("ff_sub.norm", "ln_2", suffixes=WB),
)
TABLE = Table(
    embed="transformer.wte.weight",
    top=(
        row("decoder.positions.0.table.weight", "transformer.wpe.weight"),
        row("decoder.final_norm", "transformer.ln_f", suffixes=WB),
    ),
    stacks=(Stack("decoder.layers.{i}.", "transformer.h.{i}.", LAYER),),
)


def gpt2_keys(config: Any) -> dict[str, Any]:
    require(config, "activation_function", tuple(ACTIVATIONS))
    require(config, "scale_attn_weights", True)
    require(config, "scale_attn_by_inverse_layer_idx", (False, None))
    require(config, "add_cross_attention", (False, None))
    require(config, "tie_word_embeddings", (True, None), "zoo's GPT-2 ties its output to the embedding")
    d_ff = config.n_inner or 4 * config.n_embd
    return COMPOSITION.keys(FIELDS.read(config), activation=ACTIVATIONS[config.activation_function], d_ff=d_ff)


def gpt2_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return {
        **FIELDS.write(cfg),
        "n_inner": cfg.d_ff,
        "activation_function": HF_ACTIVATIONS[cfg.activation.value],
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": None,
    }


NAMES = ("gpt2", "GPT2LMHeadModel", "GPT2Config")
DESCRIPTION = f"gpt2: decoder-only, learned positions, pre-LN layernorm, {ACTIVATIONS_LISTED}, biases, tied"
GPT2 = Family(NAMES, DESCRIPTION, COMPOSITION, (gpt2_keys, gpt2_hf_keys), TABLE)
