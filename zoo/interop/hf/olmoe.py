"""OLMoE (Muennighoff et al. 2024, "OLMoE: Open Mixture-of-Experts Language Models") <-> zoo's
`olmoe` composition: decoder-only, RoPE, pre-norm RMSNorm, QK-norm over the whole projection,
no biases, and a mixture of SwiGLU experts in every layer.

OLMoE's layers are Llama's (`input_layernorm` before attention, `post_attention_layernorm`
before the feed-forward unit, both pre-norms), with OLMo's `q_norm` and `k_norm`: RMSNorms
over all H·Dh query (Hkv·Dh key) dimensions, after the projection and before RoPE, zoo's
`model.qk_norm=projection`. Its router takes the softmax of the E logits and the top k,
renormalised only with `norm_topk_prob` (false in OLMoE-1B-7B): `model.moe_renorm`. The
experts map as `zoo.interop.hf.experts` lays out. `clip_qkv` (q, k, v clamped) is refused:
zoo clamps nothing. transformers sizes `q_norm` by D, so Dh is D / H both ways."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.config.facts.ffn import expert_width
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import require
from zoo.interop.hf.experts import ROUTER_FIELDS, moe_options, router_keys
from zoo.interop.hf.olmo2 import QK_NORM_PROJECTION
from zoo.interop.hf.rope_decoder import DROP, LLAMA_BLOCK, LLAMA_NORMS, QK_NORMS, hf_keys, rope_table, zoo_keys
from zoo.interop.hf.table import Family, heads_span_model

TABLE = rope_table({**LLAMA_NORMS, **QK_NORMS})


def olmoe_keys(config: Any) -> dict[str, Any]:
    require(config, "attention_bias", (False, None))
    require(config, "clip_qkv", None, "zoo does not clamp the projections")
    head_dim = config.hidden_size // config.num_attention_heads
    return zoo_keys(config, qk_norm="projection", head_dim=head_dim, **router_keys(config))


def olmoe_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    experts = ROUTER_FIELDS.write(cfg)
    return hf_keys(cfg, head_dim=DROP, intermediate_size=expert_width(cfg, cfg.d_ff), clip_qkv=None, **experts)


NAMES = ("olmoe", "OlmoeForCausalLM", "OlmoeConfig")
DESCRIPTION = (
    "olmoe: decoder-only, rope, pre-norm rmsnorm, swiglu, qk-norm over the projection, a mixture of "
    "experts in every layer (softmax, top-k renormalised or not), no biases"
)
COMPOSITION = replace(LLAMA_BLOCK, options=moe_options(**QK_NORM_PROJECTION), checks=(heads_span_model,))
OLMOE = Family(NAMES, DESCRIPTION, COMPOSITION, (olmoe_keys, olmoe_hf_keys), TABLE)
