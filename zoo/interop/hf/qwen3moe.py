"""Qwen3-MoE (Qwen team 2025) <-> zoo's `qwen3` composition with `model.ffn=moe`: Qwen3's block
(decoder-only, RoPE, pre-norm RMSNorm, QK-norm per head, grouped-query attention, no biases)
whose feed-forward unit is a mixture of SwiGLU experts in every `decoder_sparse_step`-th layer.

The layers i with (i + 1) % decoder_sparse_step == 0 are mixtures, `moe_intermediate_size` wide
each, the others dense units `intermediate_size` wide: zoo's `model.moe_every`, `model.moe_d_ff`
and `model.d_ff`. The router takes the softmax of the E logits and the top k, renormalised with
`norm_topk_prob` (`model.moe_renorm`). The experts map as `zoo.interop.hf.experts` lays out.
Refused: `mlp_only_layers` (dense layers outside zoo's every-k-th pattern) and sliding-window
attention (`use_sliding_window`), as for Qwen3."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.config.facts.ffn import expert_width
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, require
from zoo.interop.hf.experts import ROUTER_FIELDS, moe_options, router_keys
from zoo.interop.hf.qwen3 import QK_NORM_HEAD, TABLE, qwen3_hf_keys, qwen3_keys
from zoo.interop.hf.rope_decoder import LLAMA_BLOCK
from zoo.interop.hf.table import Family


def qwen3moe_keys(config: Any) -> dict[str, Any]:
    """Qwen3's composition with its experts in every decoder_sparse_step-th layer."""
    require(config, "use_sliding_window", (False, None))
    require(config, "mlp_only_layers", ([], None), "zoo's dense layers are those outside every decoder_sparse_step-th")
    every = {"moe_d_ff": config.moe_intermediate_size, "moe_every": config.decoder_sparse_step}
    return {**qwen3_keys(config), **router_keys(config), **every}


def qwen3moe_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return qwen3_hf_keys(
        cfg,
        moe_intermediate_size=expert_width(cfg, cfg.d_ff),
        decoder_sparse_step=cfg.moe_every,
        mlp_only_layers=[],
        **ROUTER_FIELDS.write(cfg),
    )


NAMES = ("qwen3_moe", "Qwen3MoeForCausalLM", "Qwen3MoeConfig")
DESCRIPTION = (
    "qwen3_moe: decoder-only, rope, pre-norm rmsnorm, swiglu, qk-norm per head, a mixture of experts "
    "in every k-th layer (softmax, top-k renormalised or not), no biases"
)
COMPOSITION = replace(LLAMA_BLOCK, options=moe_options(moe_every=ANY, **QK_NORM_HEAD))
QWEN3_MOE = Family(NAMES, DESCRIPTION, COMPOSITION, (qwen3moe_keys, qwen3moe_hf_keys), TABLE)
