"""DeepSeek-V3 (DeepSeek-AI 2024) <-> zoo's llama block with multi-head latent attention
(model.kv=latent): decoder-only, RoPE, pre-norm RMSNorm, SwiGLU, no biases in the feed-forward
units. Dense layers only for now: a `DeepseekV3Config` whose layers are all dense
(`first_k_dense_replace` >= `num_hidden_layers`); its mixture layers (shared and routed experts,
group-limited routing with the score-correction bias) are refused on import, and a zoo model
with model.ffn=moe matches no family.

The attention maps through `zoo.interop.hf.mla.ATTENTION_ROWS` (DeepSeek's interleaved RoPE
rows de-interleaved into zoo's rotate-half layout, and back on export with
`rope_interleave=True`); the feed-forward units and norms as Llama's
(`zoo.interop.hf.rope_decoder`). transformers' latent norms take eps 1e-6 whatever the config
says, so model.norm_eps must be 1e-6 for the family."""

from __future__ import annotations

from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, UnsupportedConfig, hf_rope, require, rope_of
from zoo.interop.hf.mla import ATTENTION_ROWS, attention_keys, hf_attention_keys
from zoo.interop.hf.rope_decoder import DENSE, FIELDS, LLAMA_NORMS, norm_rows
from zoo.interop.hf.table import Composition, Family, Stack, Table, row

LATENT_NORM_EPS = 1e-6  # DeepseekV3RMSNorm's default, which its attention's two norms keep


def _latent_eps(cfg: ModelConfig) -> bool:
    return cfg.norm_eps == LATENT_NORM_EPS


COMPOSITION = Composition(
    "decoder_only",
    "rope",
    "pre",
    "rmsnorm",
    "swiglu",
    options={
        "kv": ("latent",),
        "q_lora_rank": ANY,
        "kv_lora_rank": ANY,
        "qk_nope_head_dim": ANY,
        "qk_rope_head_dim": ANY,
        "v_head_dim": ANY,
    },
    checks=(_latent_eps,),
)
TABLE = Table(
    embed="model.embed_tokens.weight",
    top=(row("decoder.final_norm.weight", "model.norm.weight"),),
    stacks=(Stack("decoder.layers.{i}.", "model.layers.{i}.", ATTENTION_ROWS + DENSE + norm_rows(LLAMA_NORMS)),),
)


def deepseek_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", "silu")
    require(config, "rms_norm_eps", LATENT_NORM_EPS, "the latent norms of DeepseekV3Attention keep eps 1e-6")
    if config.first_k_dense_replace < config.num_hidden_layers:
        raise UnsupportedConfig(
            f"{type(config).__name__}.first_k_dense_replace={config.first_k_dense_replace} is not supported "
            f"(supported: >= num_hidden_layers={config.num_hidden_layers}); DeepSeek's mixture layers are not mapped"
        )
    if config.attention_bias:
        raise UnsupportedConfig(
            f"{type(config).__name__}.attention_bias=True is not supported (supported: False); zoo's model.bias "
            "would add biases to the feed-forward units too"
        )
    theta, scale = rope_of(config)
    keys = {
        "position": {"kind": "rope", "theta": theta, "scale": scale},
        "tie_embeddings": bool(config.tie_word_embeddings),
        **attention_keys(config),
    }
    return COMPOSITION.keys(FIELDS.read(config), keys, activation="swiglu")


def deepseek_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return {
        **FIELDS.write(cfg),
        **hf_attention_keys(cfg),
        "hidden_act": "silu",
        "rope_parameters": hf_rope(cfg.position),
        "first_k_dense_replace": cfg.n_layers,  # every layer dense
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }


NAMES = ("deepseek_v3", "DeepseekV3ForCausalLM", "DeepseekV3Config")
DESCRIPTION = "deepseek_v3 (dense layers): decoder-only, rope, pre-norm rmsnorm, swiglu, latent attention, no biases"
DEEPSEEK_V3 = Family(NAMES, DESCRIPTION, COMPOSITION, (deepseek_keys, deepseek_hf_keys), TABLE)
