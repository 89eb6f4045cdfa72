"""OLMo 2 (OLMo et al. 2024, "2 OLMo 2 Furious") <-> zoo's `olmo2` composition: decoder-only,
RoPE, RMSNorm after each sublayer (x + norm(f(x)), a final norm after the stack), SwiGLU,
QK-norm over the whole projection, no biases.

OLMo 2's `q_norm` is an RMSNorm over all H·Dh query dimensions together (and `k_norm` over the
Hkv·Dh key dimensions), applied after the projection and before the heads are split and RoPE
turns them: zoo's `model.qk_norm=projection`. Its layers have no norm before the sublayers:
`post_attention_layernorm` and `post_feedforward_layernorm` are zoo's `model.norm=reordered`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import require
from zoo.interop.hf.rope_decoder import DROP, LLAMA_BLOCK, QK_NORMS, hf_keys, rope_table, zoo_keys
from zoo.interop.hf.table import Family

NORMS = {"self_attn_sub.norm": "post_attention_layernorm", "ff_sub.norm": "post_feedforward_layernorm"}
TABLE = rope_table({**NORMS, **QK_NORMS})
QK_NORM_PROJECTION = {"qk_norm": ("projection",), "qk_norm_type": (None, "rmsnorm")}


def olmo2_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", "silu")
    require(config, "attention_bias", (False, None))
    return zoo_keys(config, norm="reordered", qk_norm="projection")


def olmo2_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return hf_keys(cfg, head_dim=DROP if cfg.head_dim * cfg.n_heads == cfg.d_model else cfg.head_dim)


NAMES = ("olmo2", "Olmo2ForCausalLM", "Olmo2Config")
DESCRIPTION = (
    "olmo2: decoder-only, rope, reordered rmsnorm (after the sublayers), swiglu, qk-norm over the projection, no biases"
)
COMPOSITION = replace(LLAMA_BLOCK, norm="reordered", options=QK_NORM_PROJECTION)
OLMO2 = Family(NAMES, DESCRIPTION, COMPOSITION, (olmo2_keys, olmo2_hf_keys), TABLE)
