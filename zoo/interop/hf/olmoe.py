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

from zoo.config.facts.ffn import expert_width
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import composed_as, hf_rope, require, rope_of
from zoo.interop.hf.experts import MixtureLayers, moe_options, router_keys
from zoo.interop.hf.rope_decoder import RopeDecoderConverter

NORMS = {
    "self_attn_sub.norm": "input_layernorm",
    "ff_sub.norm": "post_attention_layernorm",
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
}


class OlmoeConverter(MixtureLayers, RopeDecoderConverter):
    description = (
        "olmoe: decoder-only, rope, pre-norm rmsnorm, swiglu, qk-norm over the projection, a mixture of "
        "experts in every layer (softmax, top-k renormalised or not), no biases"
    )
    model_class = "OlmoeForCausalLM"
    layer_norms = NORMS

    @staticmethod
    def matches(cfg) -> bool:
        options = moe_options(qk_norm=("projection",), qk_norm_type=(None, "rmsnorm"))
        return (
            composed_as(
                cfg,
                options,
                family="decoder_only",
                position="rope",
                norm="pre",
                norm_type="rmsnorm",
                activation="swiglu",
            )
            and not cfg.bias
            and cfg.head_dim * cfg.n_heads == cfg.d_model
        )

    def zoo_config(self, config):
        require(config, "attention_bias", (False, None))
        require(config, "clip_qkv", None, "zoo does not clamp the projections")
        theta, scale = rope_of(config)
        n_heads = config.num_attention_heads
        return ModelConfig(
            family="decoder_only",
            position={"kind": "rope", "theta": theta, "scale": scale},
            norm="pre",
            norm_type="rmsnorm",
            norm_eps=config.rms_norm_eps,
            activation="swiglu",
            qk_norm="projection",
            d_model=config.hidden_size,
            n_heads=n_heads,
            n_kv_heads=config.num_key_value_heads or n_heads,
            head_dim=config.hidden_size // n_heads,
            n_layers=config.num_hidden_layers,
            d_ff=config.intermediate_size,
            vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings,
            dropout=0.0,
            tie_embeddings=bool(config.tie_word_embeddings),
            bias=False,
            **router_keys(config, "num_experts", bool(config.norm_topk_prob)),
        )

    def hf_config(self, cfg):
        from transformers import OlmoeConfig

        return OlmoeConfig(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=expert_width(cfg, cfg.d_ff),
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.n_kv_heads,
            hidden_act="silu",
            max_position_embeddings=cfg.max_seq_len,
            rms_norm_eps=cfg.norm_eps,
            tie_word_embeddings=cfg.tie_embeddings,
            rope_parameters=hf_rope(cfg.position),
            attention_bias=False,
            attention_dropout=0.0,
            clip_qkv=None,
            num_experts=cfg.moe_experts,
            num_experts_per_tok=cfg.moe_top_k,
            norm_topk_prob=cfg.moe_renorm,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
