"""DeepSeek-V3 (DeepSeek-AI 2024) <-> zoo's llama block with multi-head latent attention
(model.kv=latent) and DeepSeek's mixture: decoder-only, RoPE, pre-norm RMSNorm, SwiGLU, no
biases in the feed-forward units; its first `first_k_dense_replace` layers dense
(model.moe_first_dense), the rest a mixture of routed experts with shared ones (model.ffn=moe,
model.moe_shared), a sigmoid gate (model.moe_gate=sigmoid), group-limited top-k (n_group,
topk_group: model.moe_groups, model.moe_top_groups), weights renormalised (norm_topk_prob:
model.moe_renorm) and scaled (routed_scaling_factor: model.moe_scale), and the score-correction
bias `e_score_correction_bias` as the router's selection bias (model.moe_balance=bias, its
`ff.router.score_bias` buffer). A config whose layers are all dense imports as model.ffn=dense.

The attention maps through `zoo.interop.hf.mla.ATTENTION_ROWS` (DeepSeek's interleaved RoPE
rows de-interleaved into zoo's rotate-half layout, and back on export with
`rope_interleave=True`); the feed-forward units through `zoo.interop.hf.deepseek_moe`'s rows;
the norms as Llama's (`zoo.interop.hf.rope_decoder`). transformers' latent norms take eps 1e-6
whatever the config says, so model.norm_eps must be 1e-6 for the family. A zoo mixture balanced
by model.moe_balance=aux_loss or none exports with a zero correction bias (the same choices);
one with a softmax gate, capacity, dense layers between mixtures or no shared expert matches no
family: transformers' `DeepseekV3MoE` has none of these. The multi-token prediction layers of a
checkpoint (`num_nextn_predict_layers`) are not in transformers' model and are not read."""

from __future__ import annotations

from typing import Any

from zoo.config.facts.ffn import FFNKind
from zoo.config.facts.moe_routing import MoEBalance
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, OPTIONS, UnsupportedConfig, hf_rope, require, rope_of
from zoo.interop.hf.deepseek_moe import DEEPSEEK_FFN, deepseek_moe_hf_keys, deepseek_moe_keys
from zoo.interop.hf.mla import ATTENTION_ROWS, attention_keys, hf_attention_keys
from zoo.interop.hf.rope_decoder import FIELDS, LLAMA_NORMS, norm_rows
from zoo.interop.hf.table import Composition, Family, Stack, Table, row

LATENT_NORM_EPS = 1e-6  # DeepseekV3RMSNorm's default, which its attention's two norms keep


def _latent_eps(cfg: ModelConfig) -> bool:
    return cfg.norm_eps == LATENT_NORM_EPS


# the mixture's keys a dense DeepSeek-V3 leaves at their defaults (`common.OPTIONS`)
MOE_KEYS = (
    "moe_experts",
    "moe_top_k",
    "moe_d_ff",
    "moe_shared",
    "moe_gate",
    "moe_renorm",
    "moe_capacity",
    "moe_every",
    "moe_balance",
    "moe_bias_rate",
    "moe_groups",
    "moe_top_groups",
    "moe_scale",
    "moe_first_dense",
)


def _deepseek_ffn(cfg: ModelConfig) -> bool:
    """Dense layers with the mixture's keys at their defaults, or DeepSeek's mixture: a sigmoid
    gate, dropless, a mixture in every layer past the first model.moe_first_dense, shared experts."""
    if cfg.ffn == FFNKind.dense:
        return all(getattr(cfg, key) in OPTIONS[key] for key in MOE_KEYS)
    return (
        cfg.ffn == FFNKind.moe
        and cfg.moe_gate.value == "sigmoid"
        and cfg.moe_capacity is None
        and cfg.moe_every == 1
        and cfg.moe_shared >= 1
    )


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
        "ffn": tuple(kind.value for kind in FFNKind),  # all layers dense, or mixtures after the dense first ones
        **{key: ANY for key in MOE_KEYS},
        "moe_balance": tuple(kind.value for kind in MoEBalance),
    },
    checks=(_latent_eps, _deepseek_ffn),
)
TABLE = Table(
    embed="model.embed_tokens.weight",
    top=(row("decoder.final_norm.weight", "model.norm.weight"),),
    stacks=(Stack("decoder.layers.{i}.", "model.layers.{i}.", ATTENTION_ROWS + DEEPSEEK_FFN + norm_rows(LLAMA_NORMS)),),
)


def deepseek_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", "silu")
    require(config, "rms_norm_eps", LATENT_NORM_EPS, "the latent norms of DeepseekV3Attention keep eps 1e-6")
    dense = config.first_k_dense_replace >= config.num_hidden_layers
    if not dense and config.n_shared_experts < 1:
        raise UnsupportedConfig(
            f"{type(config).__name__}.n_shared_experts={config.n_shared_experts} is not supported (supported: >= 1); "
            "transformers' DeepseekV3MoE then holds a shared unit of width 0, which zoo does not build"
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
        **({} if dense else deepseek_moe_keys(config)),
    }
    return COMPOSITION.keys(FIELDS.read(config), keys, activation="swiglu")


def deepseek_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    dense = cfg.ffn == FFNKind.dense
    return {
        **FIELDS.write(cfg),
        **hf_attention_keys(cfg),
        **({} if dense else deepseek_moe_hf_keys(cfg)),
        "hidden_act": "silu",
        "rope_parameters": hf_rope(cfg.position),
        **({"first_k_dense_replace": cfg.n_layers} if dense else {}),  # every layer dense
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }


NAMES = ("deepseek_v3", "DeepseekV3ForCausalLM", "DeepseekV3Config")
DESCRIPTION = (
    "deepseek_v3: decoder-only, rope, pre-norm rmsnorm, swiglu, latent attention, no biases, dense layers then "
    "(or none) a mixture in every layer with shared experts, a sigmoid gate and group-limited top-k"
)
DEEPSEEK_V3 = Family(NAMES, DESCRIPTION, COMPOSITION, (deepseek_keys, deepseek_hf_keys), TABLE)
