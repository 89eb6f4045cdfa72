"""Mixtral (Jiang et al. 2024, "Mixtral of Experts") <-> zoo's `mixtral` composition: Llama's
block (decoder-only, RoPE, pre-norm RMSNorm, grouped-query attention, no biases) whose
feed-forward unit is a mixture of SwiGLU experts in every layer.

Mixtral's router takes the softmax of its E logits, picks the top k and renormalises their
weights to sum 1 (`model.moe_renorm=true`); its experts are `intermediate_size` wide. The
experts map as `zoo.interop.hf.experts` lays out. `sliding_window` W (every layer) is zoo's
`model.attention=sliding model.window=W`: a query at i sees the keys i - W < j <= i, as in
Gemma 2 (`zoo.interop.hf.gemma2`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.config.facts.attention import AttentionKind
from zoo.config.facts.ffn import expert_width
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY
from zoo.interop.hf.experts import moe_options
from zoo.interop.hf.llama import TABLE, llama_keys
from zoo.interop.hf.rope_decoder import DROP, LLAMA_BLOCK, hf_keys
from zoo.interop.hf.table import Family, fields

ROUTER_FIELDS = fields("moe_experts num_local_experts", "moe_top_k num_experts_per_tok")  # renormalised always


def mixtral_keys(config: Any) -> dict[str, Any]:
    """Llama's composition with Mixtral's experts, and its sliding window where it has one."""
    window = getattr(config, "sliding_window", None)
    attention = {"attention": "sliding", "window": window} if window is not None else {}
    router = {"ffn": "moe", **ROUTER_FIELDS.read(config), "moe_renorm": True}
    return {**llama_keys(config), **router, **attention}


def mixtral_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return hf_keys(
        cfg,
        attention_bias=DROP,
        intermediate_size=expert_width(cfg, cfg.d_ff),
        sliding_window=cfg.window if cfg.attention.value == "sliding" else None,
        router_jitter_noise=0.0,
        **ROUTER_FIELDS.write(cfg),
    )


NAMES = ("mixtral", "MixtralForCausalLM", "MixtralConfig")
DESCRIPTION = (
    "mixtral: decoder-only, rope, pre-norm rmsnorm, swiglu, a mixture of experts in every layer "
    f"(softmax, top-k renormalised), {AttentionKind.full.value} or {AttentionKind.sliding.value} attention, no biases"
)
OPTIONS = moe_options(moe_renorm=(True,), attention=(AttentionKind.full.value, AttentionKind.sliding.value), window=ANY)
MIXTRAL = Family(NAMES, DESCRIPTION, replace(LLAMA_BLOCK, options=OPTIONS), (mixtral_keys, mixtral_hf_keys), TABLE)
