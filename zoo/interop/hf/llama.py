"""Llama (Touvron et al. 2023) <-> zoo's `llama` composition: decoder-only, RoPE, pre-norm
RMSNorm, SwiGLU, grouped-query attention, no biases.

The weights map as `zoo.interop.hf.rope_decoder`'s table lays out the family Llama began;
Llama's norms are the two pre-norms of each layer."""

from __future__ import annotations

from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import require
from zoo.interop.hf.rope_decoder import LLAMA_BLOCK, LLAMA_NORMS, hf_keys, rope_table, zoo_keys
from zoo.interop.hf.table import Family

TABLE = rope_table(LLAMA_NORMS)


def llama_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", "silu")
    require(config, "attention_bias", (False, None))
    require(config, "mlp_bias", (False, None))
    require(config, "pretraining_tp", (1, None))
    return zoo_keys(config)


def llama_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return hf_keys(cfg, mlp_bias=False)


NAMES = ("llama", "LlamaForCausalLM", "LlamaConfig")
DESCRIPTION = "llama: decoder-only, rope, pre-norm rmsnorm, swiglu, no biases"
LLAMA = Family(NAMES, DESCRIPTION, LLAMA_BLOCK, (llama_keys, llama_hf_keys), TABLE)
