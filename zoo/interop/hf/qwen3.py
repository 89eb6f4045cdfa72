"""Qwen3 (Qwen team 2025) <-> zoo's `qwen3` composition: Llama's block (decoder-only, RoPE,
pre-norm RMSNorm, SwiGLU, grouped-query attention, no biases) with QK-norm per head.

Qwen3's `q_norm` and `k_norm` are RMSNorms over each head's Dh dimensions, one weight (Dh)
shared by the heads, applied after the projection and before RoPE: zoo's `model.qk_norm=head`
with the RMSNorm of the block. Sliding-window layers (`use_sliding_window`, on the layers from
`max_window_layers` on) are refused: zoo's pattern puts the global layers elsewhere."""

from __future__ import annotations

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import UnsupportedConfig, composed_as, hf_rope, require, rope_of
from zoo.interop.hf.rope_decoder import RopeDecoderConverter

NORMS = {"self_attn_sub.norm": "input_layernorm", "ff_sub.norm": "post_attention_layernorm",
         "self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm"}


class Qwen3Converter(RopeDecoderConverter):
    description = "qwen3: decoder-only, rope, pre-norm rmsnorm, swiglu, qk-norm per head, no biases"
    model_class = "Qwen3ForCausalLM"
    layer_norms = NORMS

    @staticmethod
    def matches(cfg) -> bool:
        return (composed_as(cfg, {"qk_norm": ("head",), "qk_norm_type": (None, "rmsnorm")}, family="decoder_only",
                            position="rope", norm="pre", norm_type="rmsnorm", activation="swiglu")
                and not cfg.bias)

    def zoo_config(self, config):
        require(config, "hidden_act", "silu")
        require(config, "attention_bias", (False, None))
        layers = list(getattr(config, "layer_types", None) or [])
        if any(kind != "full_attention" for kind in layers):
            raise UnsupportedConfig(f"{type(config).__name__}.layer_types={layers} is not supported "
                                    f"(supported: every layer 'full_attention'; use_sliding_window=False)")
        theta, scale = rope_of(config)
        return ModelConfig(
            family="decoder_only", position={"kind": "rope", "theta": theta, "scale": scale},
            norm="pre", norm_type="rmsnorm", norm_eps=config.rms_norm_eps, activation="swiglu",
            qk_norm="head", d_model=config.hidden_size, n_heads=config.num_attention_heads,
            n_kv_heads=config.num_key_value_heads or config.num_attention_heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
            n_layers=config.num_hidden_layers, d_ff=config.intermediate_size, vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings, dropout=0.0,
            tie_embeddings=bool(config.tie_word_embeddings), bias=False)

    def hf_config(self, cfg):
        from transformers import Qwen3Config

        return Qwen3Config(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
            num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim, hidden_act="silu", max_position_embeddings=cfg.max_seq_len,
            rms_norm_eps=cfg.norm_eps, tie_word_embeddings=cfg.tie_embeddings,
            rope_parameters=hf_rope(cfg.position), attention_bias=False, use_sliding_window=False,
            attention_dropout=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=None)
