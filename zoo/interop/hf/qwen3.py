"""Qwen3 (Qwen team 2025) <-> zoo's `qwen3` composition: Llama's block (decoder-only, RoPE,
pre-norm RMSNorm, SwiGLU, grouped-query attention, no biases) with QK-norm per head.

Qwen3's `q_norm` and `k_norm` are RMSNorms over each head's Dh dimensions, one weight (Dh)
shared by the heads, applied after the projection and before RoPE: zoo's `model.qk_norm=head`
with the RMSNorm of the block. Sliding-window layers (`use_sliding_window`, on the layers from
`max_window_layers` on) are refused: zoo's pattern puts the global layers elsewhere."""

from __future__ import annotations

from dataclasses import replace

from zoo.interop.hf.common import UnsupportedConfig, composed_as, hf_rope
from zoo.interop.hf.llama import LlamaConverter

NORMS = {
    "self_attn_sub.norm": "input_layernorm",
    "ff_sub.norm": "post_attention_layernorm",
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
}


class Qwen3Converter(LlamaConverter):
    description = "qwen3: decoder-only, rope, pre-norm rmsnorm, swiglu, qk-norm per head, no biases"
    model_class = "Qwen3ForCausalLM"
    layer_norms = NORMS

    @staticmethod
    def matches(cfg) -> bool:
        return (
            composed_as(
                cfg,
                {"qk_norm": ("head",), "qk_norm_type": (None, "rmsnorm")},
                family="decoder_only",
                position="rope",
                norm="pre",
                norm_type="rmsnorm",
                activation="swiglu",
            )
            and not cfg.bias
        )

    def zoo_config(self, config):
        """Llama's composition with QK-norm per head, once every layer is full attention."""
        layers = list(getattr(config, "layer_types", None) or [])
        if any(kind != "full_attention" for kind in layers):
            raise UnsupportedConfig(
                f"{type(config).__name__}.layer_types={layers} is not supported "
                f"(supported: every layer 'full_attention'; use_sliding_window=False)"
            )
        return replace(super().zoo_config(config), qk_norm="head")

    def hf_config(self, cfg):
        from transformers import Qwen3Config

        return Qwen3Config(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=cfg.d_ff,
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim,
            hidden_act="silu",
            max_position_embeddings=cfg.max_seq_len,
            rms_norm_eps=cfg.norm_eps,
            tie_word_embeddings=cfg.tie_embeddings,
            rope_parameters=hf_rope(cfg.position),
            attention_bias=False,
            use_sliding_window=False,
            attention_dropout=0.0,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
