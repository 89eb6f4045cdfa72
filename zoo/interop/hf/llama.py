"""Llama (Touvron et al. 2023) <-> zoo's `llama` composition: decoder-only, RoPE, pre-norm
RMSNorm, SwiGLU, grouped-query attention, no biases.

The weights map as `zoo.interop.hf.rope_decoder` lays out the family Llama began; Llama's
norms are the two pre-norms of each layer."""

from __future__ import annotations

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import composed_as, hf_rope, require, rope_of
from zoo.interop.hf.rope_decoder import RopeDecoderConverter


class LlamaConverter(RopeDecoderConverter):
    description = "llama: decoder-only, rope, pre-norm rmsnorm, swiglu, no biases"
    model_class = "LlamaForCausalLM"
    layer_norms = {"self_attn_sub.norm": "input_layernorm", "ff_sub.norm": "post_attention_layernorm"}

    @staticmethod
    def matches(cfg) -> bool:
        return (
            composed_as(
                cfg, family="decoder_only", position="rope", norm="pre", norm_type="rmsnorm", activation="swiglu"
            )
            and not cfg.bias
        )

    def zoo_config(self, config):
        require(config, "hidden_act", "silu")
        require(config, "attention_bias", (False, None))
        require(config, "mlp_bias", (False, None))
        require(config, "pretraining_tp", (1, None))
        theta, scale = rope_of(config)
        return ModelConfig(
            family="decoder_only",
            position={"kind": "rope", "theta": theta, "scale": scale},
            norm="pre",
            norm_type="rmsnorm",
            norm_eps=config.rms_norm_eps,
            activation="swiglu",
            d_model=config.hidden_size,
            n_heads=config.num_attention_heads,
            n_kv_heads=config.num_key_value_heads or config.num_attention_heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
            n_layers=config.num_hidden_layers,
            d_ff=config.intermediate_size,
            vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings,
            dropout=0.0,
            tie_embeddings=bool(config.tie_word_embeddings),
            bias=False,
        )

    def hf_config(self, cfg):
        from transformers import LlamaConfig

        return LlamaConfig(
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
            mlp_bias=False,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
