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

from dataclasses import replace
from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, UnsupportedConfig, require
from zoo.interop.hf.rope_decoder import DROP, LLAMA_BLOCK, hf_keys, rope_table, zoo_keys
from zoo.interop.hf.table import PLUS_ONE, Family, fields, tied_embeddings

NORMS = {
    "self_attn_sub.norm": "input_layernorm",
    "self_attn_sub.norm_out": "post_attention_layernorm",
    "ff_sub.norm": "pre_feedforward_layernorm",
    "ff_sub.norm_out": "post_feedforward_layernorm",
}
FULL, SLIDING = "full_attention", "sliding_attention"
SOFTCAPS = fields("attn_softcap attn_logit_softcapping", "final_softcap final_logit_softcapping")
TABLE = rope_table(NORMS, norm=PLUS_ONE)  # the final norm and the layer norms hold w + 1
OPTIONS = {
    "scale_embeddings": (True,),
    "attention_scale": ANY,
    "attn_softcap": ANY,
    "final_softcap": ANY,
    "attention": ANY,
    "window": ANY,
    "global_every": ANY,
}


def pattern(layer_types: list[str], n_layers: int, config: Any) -> dict[str, Any]:
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


def layer_kinds(n_layers: int, global_every: int | None) -> list[str]:
    """transformers' `layer_types` of zoo's sliding pattern: layer i is full when (i + 1) % k == 0."""
    return [FULL if global_every and (i + 1) % global_every == 0 else SLIDING for i in range(n_layers)]


def pre_attn_scalar(cfg: ModelConfig) -> int | None:
    """Gemma 2's query_pre_attn_scalar (an integer) for zoo's attention_scale: s = scalar^-0.5;
    None where 1/s² is no integer (transformers' config holds an int)."""
    if cfg.attention_scale is None:
        return cfg.head_dim
    scalar = cfg.attention_scale**-2
    return round(scalar) if abs(scalar - round(scalar)) <= 1e-6 * scalar and round(scalar) >= 1 else None


def gemma2_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_activation", ("gelu_pytorch_tanh", "gelu_new"))
    require(config, "attention_bias", (False, None))
    require(config, "use_bidirectional_attention", (False, None))
    require(config, "tie_word_embeddings", (True, None), "zoo's Gemma 2 ties its output to the embedding")
    keys = zoo_keys(config, norm="sandwich", activation="geglu_tanh", tie_embeddings=True, scale_embeddings=True)
    layers = pattern(list(config.layer_types), config.num_hidden_layers, config)
    if layers["attention"] == "sliding":
        layers["window"] = config.sliding_window
    scalar = config.query_pre_attn_scalar
    return {
        **keys,
        "attention_scale": None if scalar == keys["head_dim"] else scalar**-0.5,
        **SOFTCAPS.read(config),
        **layers,
    }


def gemma2_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    sliding = cfg.attention.value == "sliding"
    return hf_keys(
        cfg,
        hidden_act=DROP,
        hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True,
        query_pre_attn_scalar=pre_attn_scalar(cfg),
        sliding_window=cfg.window if sliding else cfg.max_seq_len,  # read by no layer, but read
        layer_types=layer_kinds(cfg.n_layers, cfg.global_every) if sliding else [FULL] * cfg.n_layers,
        **SOFTCAPS.write(cfg),
    )


NAMES = ("gemma2", "Gemma2ForCausalLM", "Gemma2Config")
DESCRIPTION = (
    "gemma2: decoder-only, rope, sandwich rmsnorm, geglu_tanh, scaled tied embeddings, soft-capping, "
    "sliding/global layers, no biases"
)
COMPOSITION = replace(
    LLAMA_BLOCK,
    norm="sandwich",
    activation="geglu_tanh",
    options=OPTIONS,
    checks=(tied_embeddings, lambda cfg: pre_attn_scalar(cfg) is not None),
)
GEMMA2 = Family(NAMES, DESCRIPTION, COMPOSITION, (gemma2_keys, gemma2_hf_keys), TABLE)
