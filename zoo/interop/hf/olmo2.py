"""OLMo 2 (OLMo et al. 2024, "2 OLMo 2 Furious") <-> zoo's `olmo2` composition: decoder-only,
RoPE, RMSNorm after each sublayer (x + norm(f(x)), a final norm after the stack), SwiGLU,
QK-norm over the whole projection, no biases.

OLMo 2's `q_norm` is an RMSNorm over all H·Dh query dimensions together (and `k_norm` over the
Hkv·Dh key dimensions), applied after the projection and before the heads are split and RoPE
turns them: zoo's `model.qk_norm=projection`. Its layers have no norm before the sublayers:
`post_attention_layernorm` and `post_feedforward_layernorm` are zoo's `model.norm=reordered`."""

from __future__ import annotations

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import composed_as, hf_rope, require, rope_of
from zoo.interop.hf.rope_decoder import RopeDecoderConverter

NORMS = {
    "self_attn_sub.norm": "post_attention_layernorm",
    "ff_sub.norm": "post_feedforward_layernorm",
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
}


class Olmo2Converter(RopeDecoderConverter):
    description = (
        "olmo2: decoder-only, rope, reordered rmsnorm (after the sublayers), swiglu, "
        "qk-norm over the projection, no biases"
    )
    model_class = "Olmo2ForCausalLM"
    layer_norms = NORMS

    @staticmethod
    def matches(cfg) -> bool:
        return (
            composed_as(
                cfg,
                {"qk_norm": ("projection",), "qk_norm_type": (None, "rmsnorm")},
                family="decoder_only",
                position="rope",
                norm="reordered",
                norm_type="rmsnorm",
                activation="swiglu",
            )
            and not cfg.bias
        )

    def zoo_config(self, config):
        require(config, "hidden_act", "silu")
        require(config, "attention_bias", (False, None))
        theta, scale = rope_of(config)
        n_heads = config.num_attention_heads
        return ModelConfig(
            family="decoder_only",
            position={"kind": "rope", "theta": theta, "scale": scale},
            norm="reordered",
            norm_type="rmsnorm",
            norm_eps=config.rms_norm_eps,
            activation="swiglu",
            qk_norm="projection",
            d_model=config.hidden_size,
            n_heads=n_heads,
            n_kv_heads=config.num_key_value_heads or n_heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // n_heads,
            n_layers=config.num_hidden_layers,
            d_ff=config.intermediate_size,
            vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings,
            dropout=0.0,
            tie_embeddings=bool(config.tie_word_embeddings),
            bias=False,
        )

    def hf_config(self, cfg):
        from transformers import Olmo2Config

        extra = {} if cfg.head_dim * cfg.n_heads == cfg.d_model else {"head_dim": cfg.head_dim}
        return Olmo2Config(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=cfg.d_ff,
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
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
            **extra,
        )
