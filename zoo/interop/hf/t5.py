"""T5 (Raffel et al. 2020) v1.0 and v1.1 <-> zoo's `t5` composition: encoder-decoder, bucketed
relative position bias (one table per stack, in its first layer), pre-norm RMSNorm, no biases,
attention scores not scaled by 1/sqrt(Dh) (`attention_scale=1.0`).

v1.0: ReLU, output projection tied to the embedding, final hidden states scaled by D^-0.5
(`scale_output`). v1.1: tanh-GELU gated (`geglu_tanh`), untied, unscaled. Both variants, and
`gelu` / `gated-silu` (swiglu), convert; which one is read from the weights and the config.

A zoo model with the default attention scale exports exactly by folding 1/sqrt(Dh) into W_q
(the `QUERY_SCALE` transform)."""

from __future__ import annotations

from typing import Any

import torch

from zoo.config.facts.activations import ACTIVATION_FACTS
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, UnsupportedConfig
from zoo.interop.hf.table import Composition, Family, Row, Stack, Table, Transform, fields, one_kv_per_head, row

# T5Config.feed_forward_proj -> zoo activation
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gated-gelu": "geglu_tanh", "gated-silu": "swiglu"}
HF_ACTIVATIONS = {zoo: hf for hf, zoo in ACTIVATIONS.items()}
# T5 never scales the scores (export folds zoo's scale into W_q) and scales outputs or not
OPTIONS = {"attention_scale": ANY, "scale_output": (True, False)}
COMPOSITION = Composition(
    "encoder_decoder", "relative", "pre", "rmsnorm", tuple(HF_ACTIVATIONS), False, OPTIONS, (one_kv_per_head,)
)
FIELDS = fields(
    "d_model d_model",
    "n_heads num_heads",
    "head_dim d_kv",
    "n_layers num_layers",
    "d_ff d_ff",
    "vocab_size vocab_size",
    "norm_eps layer_norm_epsilon",
)


def fold_query_scale(weight: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """zoo's score scale (default 1/sqrt(Dh)) folded into the query rows, as T5 never scales."""
    q_scale = cfg.attention_scale if cfg.attention_scale is not None else cfg.head_dim**-0.5
    q_rows = cfg.n_heads * cfg.head_dim
    if q_scale == 1.0:
        return weight
    return torch.cat([weight[:q_rows] * q_scale, weight[q_rows:]])  # (H·Dh + ..., D)


def gated(cfg: ModelConfig, i: int) -> bool:
    return ACTIVATION_FACTS[cfg.activation].gated


def plain(cfg: ModelConfig, i: int) -> bool:
    return not gated(cfg, i)


QUERY_SCALE = Transform("query_scale", to_hf=fold_query_scale)  # imported as it is: T5 scales by 1.0
SELF = (
    row("self_attn.qkv_proj.weight", *(f"0.SelfAttention.{p}.weight" for p in "qkv"), transform=QUERY_SCALE),
    row("self_attn.o_proj.weight", "0.SelfAttention.o.weight"),
    row("self_attn_sub.norm.weight", "0.layer_norm.weight"),
)
CROSS = (
    row("cross_attn.q_proj.weight", "1.EncDecAttention.q.weight", transform=QUERY_SCALE),
    row("cross_attn.kv_proj.weight", "1.EncDecAttention.k.weight", "1.EncDecAttention.v.weight"),
    row("cross_attn.o_proj.weight", "1.EncDecAttention.o.weight"),
    row("cross_attn_sub.norm.weight", "1.layer_norm.weight"),
)


def feed_forward(ff: int) -> tuple[Row, ...]:
    """The rows of the feed-forward sublayer, the `ff`-th of the block."""
    dense = f"{ff}.DenseReluDense"
    return (
        row("ff.w_in.weight", f"{dense}.wi_0.weight", f"{dense}.wi_1.weight", when=gated),
        row("ff.w_in.weight", f"{dense}.wi.weight", when=plain),
        row("ff.w_out.weight", f"{dense}.wo.weight"),
        row("ff_sub.norm.weight", f"{ff}.layer_norm.weight"),
    )


def _side(side: str) -> tuple[Row, ...]:
    """The rows of the `side` stack's final norm and relative-bias table (in its first block)."""
    return (
        row(f"{side}.final_norm.weight", f"{side}.final_layer_norm.weight"),
        row(f"{side}.positions.0.table.weight", f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
    )


TABLE = Table(
    embed="shared.weight",
    top=(*_side("encoder"), *_side("decoder")),
    stacks=(
        Stack("encoder.layers.{i}.", "encoder.block.{i}.layer.", SELF + feed_forward(1)),
        Stack(
            "decoder.layers.{i}.",
            "decoder.block.{i}.layer.",
            SELF + CROSS + feed_forward(2),
            lambda cfg: cfg.decoder_layers,
        ),
    ),
    aliases={f"{side}.embed_tokens.weight": "shared.weight" for side in ("encoder", "decoder")},
)


def t5_keys(config: Any) -> dict[str, Any]:
    proj = getattr(config, "feed_forward_proj", None)
    if proj not in ACTIVATIONS:
        raise UnsupportedConfig(
            f"{type(config).__name__}.feed_forward_proj={proj!r} is not supported "
            f"(supported: {', '.join(map(repr, ACTIVATIONS))})"
        )
    # transformers 5 keeps v1.0's output scaling in its own field; 4.x tied it to tying
    scale = getattr(config, "scale_decoder_outputs", getattr(config, "tie_word_embeddings", True))
    buckets = {"num_buckets": config.relative_attention_num_buckets}
    position = {"kind": "relative", **buckets, "max_distance": config.relative_attention_max_distance}
    return COMPOSITION.keys(
        FIELDS.read(config),
        position=position,
        activation=ACTIVATIONS[proj],
        n_decoder_layers=config.num_decoder_layers or config.num_layers,
        max_seq_len=getattr(config, "n_positions", None) or 512,
        tie_embeddings=True,
        attention_scale=1.0,
        scale_output=bool(scale),
    )


def t5_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    """T5Config's arguments; transformers 4 scales the outputs exactly when the embeddings are
    tied, so another choice is refused there (transformers 5 reads `scale_decoder_outputs`)."""
    from transformers import T5Config

    if not hasattr(T5Config(), "scale_decoder_outputs") and cfg.scale_output != cfg.tie_embeddings:
        raise UnsupportedConfig(
            "this transformers version scales T5 outputs exactly when embeddings "
            "are tied; model.scale_output must equal model.tie_embeddings"
        )
    return {
        **FIELDS.write(cfg),
        "num_decoder_layers": cfg.n_decoder_layers,
        "relative_attention_num_buckets": cfg.position.num_buckets,
        "relative_attention_max_distance": cfg.position.max_distance,
        "dropout_rate": 0.0,
        "feed_forward_proj": HF_ACTIVATIONS[cfg.activation.value],
        "tie_word_embeddings": cfg.tie_embeddings,
        "scale_decoder_outputs": cfg.scale_output,
        "decoder_start_token_id": 0,
        "pad_token_id": 0,
        "eos_token_id": 1,
    }


NAMES = ("t5", "T5ForConditionalGeneration", "T5Config")
DESCRIPTION = "t5: encoder-decoder, relative bias, pre-norm rmsnorm, " + "/".join(HF_ACTIVATIONS) + ", no biases"
T5 = Family(NAMES, DESCRIPTION, COMPOSITION, (t5_keys, t5_hf_keys), TABLE, tie_from_weights=True)
