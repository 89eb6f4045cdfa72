"""Mixtral (Jiang et al. 2024, "Mixtral of Experts") <-> zoo's `mixtral` composition: Llama's
block (decoder-only, RoPE, pre-norm RMSNorm, grouped-query attention, no biases) whose
feed-forward unit is a mixture of SwiGLU experts in every layer.

Mixtral's router takes the softmax of its E logits, picks the top k and renormalises their
weights to sum 1 (`model.moe_renorm=true`); its experts are `intermediate_size` wide. The
experts map as `zoo.interop.hf.experts` lays out. `sliding_window` W (every layer) is zoo's
`model.attention=sliding model.window=W`: a query at i sees the keys i - W < j <= i, as in
Gemma 2 (`zoo.interop.hf.gemma2`)."""

from __future__ import annotations

from dataclasses import replace

from zoo.config.facts.attention import AttentionKind
from zoo.config.facts.ffn import expert_width
from zoo.interop.hf.common import ANY, composed_as, hf_rope
from zoo.interop.hf.experts import MixtureLayers, moe_options, router_keys
from zoo.interop.hf.llama import LlamaConverter


class MixtralConverter(MixtureLayers, LlamaConverter):
    description = (
        "mixtral: decoder-only, rope, pre-norm rmsnorm, swiglu, a mixture of experts in every layer "
        f"(softmax, top-k renormalised), {AttentionKind.full.value} or {AttentionKind.sliding.value} attention, no biases"
    )
    model_class = "MixtralForCausalLM"

    @staticmethod
    def matches(cfg) -> bool:
        options = moe_options(
            moe_renorm=(True,), attention=(AttentionKind.full.value, AttentionKind.sliding.value), window=ANY
        )
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
        )

    def zoo_config(self, config):
        """Llama's composition with Mixtral's experts, and its sliding window where it has one."""
        window = getattr(config, "sliding_window", None)
        attention = {"attention": "sliding", "window": window} if window is not None else {}
        return replace(super().zoo_config(config), **router_keys(config, "num_local_experts", True), **attention)

    def hf_config(self, cfg):
        from transformers import MixtralConfig

        return MixtralConfig(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=expert_width(cfg, cfg.d_ff),
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim,
            hidden_act="silu",
            max_position_embeddings=cfg.max_seq_len,
            rms_norm_eps=cfg.norm_eps,
            tie_word_embeddings=cfg.tie_embeddings,
            rope_parameters=hf_rope(cfg.position),
            sliding_window=cfg.window if cfg.attention.value == "sliding" else None,
            num_local_experts=cfg.moe_experts,
            num_experts_per_tok=cfg.moe_top_k,
            router_jitter_noise=0.0,
            attention_dropout=0.0,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
