"""Mixtral (Jiang et al. 2024, "Mixtral of Experts") <-> zoo's `mixtral` composition: Llama's
block (decoder-only, RoPE, pre-norm RMSNorm, grouped-query attention, no biases) whose
feed-forward unit is a mixture of SwiGLU experts in every layer.

Mixtral's router takes the softmax of its E logits, picks the top k and renormalises their
weights to sum 1 (`model.moe_renorm=true`); its experts are `intermediate_size` wide. The
experts map as `zoo.interop.hf.experts` lays out. `sliding_window` W (every layer) is zoo's
`model.attention=sliding model.window=W`: a query at i sees the keys i - W < j <= i, as in
Gemma 2 (`zoo.interop.hf.gemma2`)."""

from __future__ import annotations

from typing import Any

from zoo.config.facts.ffn import expert_width
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY
from zoo.interop.hf.experts import moe_options, router_keys
from zoo.interop.hf.llama import TABLE, llama_keys
from zoo.interop.hf.rope_decoder import DROP, LLAMA_BLOCK, hf_keys
from zoo.interop.hf.table import Family


def mixtral_keys(config: Any) -> dict[str, Any]:
    """Llama's composition with Mixtral's experts, and its sliding window where it has one."""
    window = getattr(config, "sliding_window", None)
    attention = {"attention": "sliding", "window": window} if window is not None else {}
    return {**llama_keys(config), **router_keys(config, "num_local_experts", True), **attention}


def mixtral_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return hf_keys(
        cfg,
        attention_bias=DROP,
        intermediate_size=expert_width(cfg, cfg.d_ff),
        sliding_window=cfg.window if cfg.attention.value == "sliding" else None,
        num_local_experts=cfg.moe_experts,
        num_experts_per_tok=cfg.moe_top_k,
        router_jitter_noise=0.0,
    )


MIXTRAL = Family(
    model_type="mixtral",
    description=(
        "mixtral: decoder-only, rope, pre-norm rmsnorm, swiglu, a mixture of experts in every layer "
        "(softmax, top-k renormalised), full or sliding attention, no biases"
    ),
    model_class="MixtralForCausalLM",
    config_class="MixtralConfig",
    composition=LLAMA_BLOCK,
    options=moe_options(moe_renorm=(True,), attention=("full", "sliding"), window=ANY),
    zoo_keys=mixtral_keys,
    hf_keys=mixtral_hf_keys,
    table=lambda cfg: TABLE,
)
