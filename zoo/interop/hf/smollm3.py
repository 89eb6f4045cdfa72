"""SmolLM3 (Hugging Face 2025) <-> zoo's `smollm3` composition: Llama's block (decoder-only,
RoPE, pre-norm RMSNorm, SwiGLU, grouped-query attention, no biases, tied embeddings) with every
k-th layer taking no positions (NoPE).

SmolLM3 marks its layers in `no_rope_layers` (1: the layer rotates q and k, 0: it does not),
made from `no_rope_layer_interval` as int((i + 1) % k != 0): zoo's `model.position.nope_every=k`.
A list that is no such pattern, and sliding-window layers, are refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, UnsupportedConfig
from zoo.interop.hf.llama import llama_keys
from zoo.interop.hf.rope_decoder import LLAMA_BLOCK, LLAMA_NORMS, hf_keys, rope_table
from zoo.interop.hf.table import Family

TABLE = rope_table(LLAMA_NORMS)


def rope_flags(n_layers: int, every: int | None) -> list[int]:
    """SmolLM3's no_rope_layers for zoo's model.position.nope_every (None: every layer rotates)."""
    return [int(every is None or (i + 1) % every != 0) for i in range(n_layers)]


def nope_every(config: Any) -> int | None:
    """The interval of a SmolLM3 config's NoPE layers (None: none), read from no_rope_layers."""
    n = config.num_hidden_layers
    flags = list(config.no_rope_layers)[:n]
    for every in (None, *range(2, n + 1)):
        if flags == rope_flags(n, every):
            return every
    raise UnsupportedConfig(
        f"{type(config).__name__}.no_rope_layers={flags} is not supported (supported: a NoPE layer every "
        f"k-th layer, int((i + 1) % k != 0), or none)"
    )


def smollm3_keys(config: Any) -> dict[str, Any]:
    layers = list(getattr(config, "layer_types", None) or [])
    if getattr(config, "use_sliding_window", False) or any(kind != "full_attention" for kind in layers):
        raise UnsupportedConfig(
            f"{type(config).__name__}.layer_types={layers} is not supported "
            f"(supported: every layer 'full_attention'; use_sliding_window=False)"
        )
    keys = llama_keys(config)
    keys["position"] = {**keys["position"], "nope_every": nope_every(config)}
    return keys


def smollm3_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    every = cfg.position.nope_every
    return hf_keys(
        cfg,
        mlp_bias=False,
        use_sliding_window=False,
        no_rope_layers=rope_flags(cfg.n_layers, every),
        no_rope_layer_interval=every if every is not None else cfg.n_layers + 1,
    )


NAMES = ("smollm3", "SmolLM3ForCausalLM", "SmolLM3Config")
DESCRIPTION = "smollm3: decoder-only, rope with no positions in every k-th layer (NoPE), pre-norm rmsnorm, swiglu"
COMPOSITION = replace(LLAMA_BLOCK, options={"nope_every": ANY})
SMOLLM3 = Family(NAMES, DESCRIPTION, COMPOSITION, (smollm3_keys, smollm3_hf_keys), TABLE)
