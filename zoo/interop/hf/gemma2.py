"""Gemma 2 (Gemma Team 2024) <-> zoo's `gemma2` composition: decoder-only, RoPE, a norm before
and after each sublayer (x + norm_out(f(norm_in(x))): zoo's `model.norm=sandwich`), RMSNorm,
GeGLU with the tanh GELU, embeddings scaled by sqrt(D), tied, no biases; sliding-window layers
interleaved with global ones, and tanh soft-capping of the attention scores and the logits.

What transformers computes, and what it is in zoo:
- `Gemma2RMSNorm` is x/rms(x)·(1 + w) (weights start at 0): zoo's RMSNorm x/rms(x)·w with
  w + 1 stored (and w - 1 written back);
- the scores are q·kᵀ·query_pre_attn_scalar^-0.5, then capped (c·tanh(s/c), c =
  attn_logit_softcapping), then masked: `model.attention_scale` = query_pre_attn_scalar^-0.5
  (null when that is 1/sqrt(Dh)) and `model.attn_softcap`; the logits are capped by
  `final_logit_softcapping`: `model.final_softcap`;
- the embeddings are multiplied by sqrt(D) (a float32 tensor): `model.scale_embeddings`;
- a `sliding_attention` layer's query at i sees the keys j with i - W < j <= i (masking_utils'
  sliding_window_overlay, W = sliding_window): `model.window` = W, keys seen with itself;
  `layer_types` alternating sliding then full (the default) is `model.global_every=2`, every
  layer sliding is null, every layer full is `model.attention=full`."""

from __future__ import annotations

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, UnsupportedConfig, composed_as, hf_rope, require, rope_of
from zoo.interop.hf.rope_decoder import RopeDecoderConverter

NORMS = {
    "self_attn_sub.norm": "input_layernorm",
    "self_attn_sub.norm_out": "post_attention_layernorm",
    "ff_sub.norm": "pre_feedforward_layernorm",
    "ff_sub.norm_out": "post_feedforward_layernorm",
}
FULL, SLIDING = "full_attention", "sliding_attention"


def pattern(layer_types: list[str], n_layers: int, config) -> dict:
    """zoo's attention, global_every of transformers' `layer_types`; UnsupportedConfig for a
    pattern zoo's (every k-th layer global, counting from 1) does not make."""
    if all(kind == FULL for kind in layer_types):
        return {"attention": "full"}
    for every in [None, *range(1, n_layers + 1)]:
        if layer_types == layer_kinds(n_layers, every):
            return {"attention": "sliding", "global_every": every}
    raise UnsupportedConfig(
        f"{type(config).__name__}.layer_types={layer_types} is not supported (supported: "
        f"every k-th layer full_attention, the others sliding_attention)"
    )


def layer_kinds(n_layers: int, global_every) -> list[str]:
    """transformers' `layer_types` of zoo's sliding pattern: layer i is full when (i + 1) % k == 0."""
    return [FULL if global_every and (i + 1) % global_every == 0 else SLIDING for i in range(n_layers)]


def pre_attn_scalar(cfg) -> int | None:
    """Gemma 2's query_pre_attn_scalar (an integer) for zoo's attention_scale: s = scalar^-0.5;
    None where 1/s² is no integer (transformers' config holds an int)."""
    if cfg.attention_scale is None:
        return cfg.head_dim
    scalar = cfg.attention_scale**-2
    return round(scalar) if abs(scalar - round(scalar)) <= 1e-6 * scalar and round(scalar) >= 1 else None


class Gemma2Converter(RopeDecoderConverter):
    description = (
        "gemma2: decoder-only, rope, sandwich rmsnorm, geglu_tanh, scaled tied embeddings, "
        "soft-capping, sliding/global layers, no biases"
    )
    model_class = "Gemma2ForCausalLM"
    layer_norms = NORMS
    norm_offset = 1.0

    @staticmethod
    def matches(cfg) -> bool:
        options = {
            "scale_embeddings": (True,),
            "attention_scale": ANY,
            "attn_softcap": ANY,
            "final_softcap": ANY,
            "attention": ANY,
            "window": ANY,
            "global_every": ANY,
        }
        return (
            composed_as(
                cfg,
                options,
                family="decoder_only",
                position="rope",
                norm="sandwich",
                norm_type="rmsnorm",
                activation="geglu_tanh",
            )
            and not cfg.bias
            and cfg.tie_embeddings
            and pre_attn_scalar(cfg) is not None
        )

    def zoo_config(self, config):
        require(config, "hidden_activation", ("gelu_pytorch_tanh", "gelu_new"))
        require(config, "attention_bias", (False, None))
        require(config, "use_bidirectional_attention", (False, None))
        require(config, "tie_word_embeddings", (True, None), "zoo's Gemma 2 ties its output to the embedding")
        theta, scale = rope_of(config)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        layers = pattern(list(config.layer_types), config.num_hidden_layers, config)
        if layers["attention"] == "sliding":
            layers["window"] = config.sliding_window
        scalar = config.query_pre_attn_scalar
        return ModelConfig(
            family="decoder_only",
            position={"kind": "rope", "theta": theta, "scale": scale},
            norm="sandwich",
            norm_type="rmsnorm",
            norm_eps=config.rms_norm_eps,
            activation="geglu_tanh",
            d_model=config.hidden_size,
            n_heads=config.num_attention_heads,
            n_kv_heads=config.num_key_value_heads or config.num_attention_heads,
            head_dim=head_dim,
            n_layers=config.num_hidden_layers,
            d_ff=config.intermediate_size,
            vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings,
            dropout=0.0,
            tie_embeddings=True,
            bias=False,
            scale_embeddings=True,
            attention_scale=None if scalar == head_dim else scalar**-0.5,
            attn_softcap=config.attn_logit_softcapping,
            final_softcap=config.final_logit_softcapping,
            **layers,
        )

    def hf_config(self, cfg):
        from transformers import Gemma2Config

        sliding = cfg.attention.value == "sliding"
        return Gemma2Config(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=cfg.d_ff,
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim,
            hidden_activation="gelu_pytorch_tanh",
            max_position_embeddings=cfg.max_seq_len,
            rms_norm_eps=cfg.norm_eps,
            tie_word_embeddings=True,
            rope_parameters=hf_rope(cfg.position),
            attention_bias=False,
            attention_dropout=0.0,
            query_pre_attn_scalar=pre_attn_scalar(cfg),
            sliding_window=cfg.window if sliding else cfg.max_seq_len,  # read by no layer, but read
            layer_types=layer_kinds(cfg.n_layers, cfg.global_every) if sliding else [FULL] * cfg.n_layers,
            attn_logit_softcapping=cfg.attn_softcap,
            final_logit_softcapping=cfg.final_softcap,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
