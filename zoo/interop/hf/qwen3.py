"""Qwen3 (Qwen team 2025) <-> zoo's `qwen3` composition: Llama's block (decoder-only, RoPE,
pre-norm RMSNorm, SwiGLU, grouped-query attention, no biases) with QK-norm per head.

Qwen3's `q_norm` and `k_norm` are RMSNorms over each head's Dh dimensions, one weight (Dh)
shared by the heads, applied after the projection and before RoPE: zoo's `model.qk_norm=head`
with the RMSNorm of the block. Sliding-window layers (`use_sliding_window`, on the layers from
`max_window_layers` on) are refused: zoo's pattern puts the global layers elsewhere."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import UnsupportedConfig
from zoo.interop.hf.llama import llama_keys
from zoo.interop.hf.rope_decoder import LLAMA_BLOCK, LLAMA_NORMS, QK_NORMS, hf_keys, rope_table
from zoo.interop.hf.table import Family

TABLE = rope_table({**LLAMA_NORMS, **QK_NORMS})
QK_NORM_HEAD = {"qk_norm": ("head",), "qk_norm_type": (None, "rmsnorm")}


def qwen3_keys(config: Any) -> dict[str, Any]:
    """Llama's composition with QK-norm per head, once every layer is full attention."""
    layers = list(getattr(config, "layer_types", None) or [])
    if any(kind != "full_attention" for kind in layers):
        raise UnsupportedConfig(
            f"{type(config).__name__}.layer_types={layers} is not supported "
            f"(supported: every layer 'full_attention'; use_sliding_window=False)"
        )
    return {**llama_keys(config), "qk_norm": "head"}


def qwen3_hf_keys(cfg: ModelConfig, **family: Any) -> dict[str, Any]:
    return hf_keys(cfg, use_sliding_window=False, **family)


NAMES = ("qwen3", "Qwen3ForCausalLM", "Qwen3Config")
DESCRIPTION = "qwen3: decoder-only, rope, pre-norm rmsnorm, swiglu, qk-norm per head, no biases"
COMPOSITION = replace(LLAMA_BLOCK, options=QK_NORM_HEAD)
QWEN3 = Family(NAMES, DESCRIPTION, COMPOSITION, (qwen3_keys, qwen3_hf_keys), TABLE)
