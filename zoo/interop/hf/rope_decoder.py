"""The tables Llama's descendants share in transformers (Llama, Qwen3, OLMo 2, Gemma 2 and the
mixtures Mixtral, OLMoE, Qwen3-MoE): their weight rows and their config fields.

Weights: `model.embed_tokens`, per layer `self_attn.{q,k,v,o}_proj` and `mlp.{gate,up,down}_proj`,
`model.norm`, `lm_head`; no biases. What differs between them is where their norms sit and
what they are called, so a family names its norms (`norm_rows`: zoo name -> transformers name,
one layer); the rest maps one to one, with zoo's two fusions: q, k, v are one `qkv_proj` (rows
q, then k, then v) and gate, up one `ff.w_in` (gate, then up). Every family here pairs RoPE's
dimensions as rotate-half, as zoo does, so q and k need no permutation. A layer the config
makes a mixture of experts maps its router and experts (`zoo.interop.hf.experts`) instead."""

from __future__ import annotations

from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import hf_rope, rope_position
from zoo.interop.hf.experts import dense_layer, moe_layer
from zoo.interop.hf.table import HIDDEN_FIELDS, IDENTITY, Composition, Row, Stack, Table, Transform, row

# Llama's block: the composition every family here starts from (OLMo 2 and Gemma 2 move the norms)
LLAMA_BLOCK = Composition("decoder_only", "rope", "pre", "rmsnorm", "swiglu")
DROP = object()  # hf_keys: an argument the family's transformers config does not take
LLAMA_NORMS = {"self_attn_sub.norm": "input_layernorm", "ff_sub.norm": "post_attention_layernorm"}
QK_NORMS = {"self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm"}
FIELDS = HIDDEN_FIELDS.extended("norm_eps rms_norm_eps")
ATTENTION = (
    row("self_attn.qkv_proj.weight", *(f"self_attn.{p}_proj.weight" for p in "qkv")),
    row("self_attn.o_proj.weight", "self_attn.o_proj.weight"),
)
DENSE = (
    row("ff.w_in.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", when=dense_layer),
    row("ff.w_out.weight", "mlp.down_proj.weight", when=dense_layer),
)
EXPERTS = (
    row("ff.router.weight", "mlp.gate.weight", when=moe_layer),  # (E, D)
    row("ff.experts.w_in", "mlp.experts.gate_up_proj", when=moe_layer),  # (E, 2·F, D): gate rows, then up rows
    row("ff.experts.w_out", "mlp.experts.down_proj", when=moe_layer),  # (E, D, F)
)


def norm_rows(norms: dict[str, str], transform: Transform = IDENTITY) -> tuple[Row, ...]:
    """One row per norm of a layer: zoo name -> transformers name, weights only."""
    return tuple(row(f"{ours}.weight", f"{theirs}.weight", transform=transform) for ours, theirs in norms.items())


def rope_table(norms: dict[str, str], norm: Transform = IDENTITY) -> Table:
    """The weight table of a Llama-like family with these layer norms (`norm` turns each norm)."""
    return Table(
        embed="model.embed_tokens.weight",
        top=(row("decoder.final_norm.weight", "model.norm.weight", transform=norm),),
        stacks=(
            Stack("decoder.layers.{i}.", "model.layers.{i}.", ATTENTION + DENSE + EXPERTS + norm_rows(norms, norm)),
        ),
    )


def zoo_keys(config: Any, **family: Any) -> dict[str, Any]:
    """The ModelConfig keys every family here reads the same way, then the family's own."""
    n_heads = config.num_attention_heads
    keys = {
        "position": rope_position(config),
        "n_kv_heads": config.num_key_value_heads or n_heads,
        "head_dim": getattr(config, "head_dim", None) or config.hidden_size // n_heads,
        "tie_embeddings": bool(config.tie_word_embeddings),  # None in some configs
    }
    return LLAMA_BLOCK.keys(FIELDS.read(config), keys, **family)


def hf_keys(cfg: ModelConfig, **family: Any) -> dict[str, Any]:
    """The transformers config arguments every family here writes the same way, then the
    family's own (`DROP` removes an argument the family's config does not take)."""
    keys = {
        **FIELDS.write(cfg),
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rope_parameters": hf_rope(cfg.position, cfg.max_seq_len),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        **family,
    }
    return {key: value for key, value in keys.items() if value is not DROP}
