"""BART (Lewis et al. 2020) <-> zoo's encoder-decoder with learned positions (two rows before
position 0: `model.position.offset=2`), post-LN LayerNorm, LayerNorm over the embeddings of
each stack (`embed_norm`), biases, tied embeddings and a bias on the logits (`output_bias`,
BART's `final_logits_bias`, zeros where zoo has none). Encoder and decoder share one token table, as in BART."""

from __future__ import annotations

from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ACTIVATIONS, ACTIVATIONS_LISTED, HF_ACTIVATIONS, UnsupportedConfig, require
from zoo.interop.hf.table import FULL_HEADS, ROW, WB, Composition, Family, Row, Stack, Table, fields, row

OFFSET = 2  # BartLearnedPositionalEmbedding's offset
# one layer of either stack; the decoder's adds cross-attention (zoo fuses k, v there: kv_proj)
LAYER = (
    row("self_attn.qkv_proj", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", suffixes=WB),
    row("self_attn.o_proj", "self_attn.out_proj", suffixes=WB),
    row("self_attn_sub.norm", "self_attn_layer_norm", suffixes=WB),
    row("ff.w_in", "fc1", suffixes=WB),
    row("ff.w_out", "fc2", suffixes=WB),
    row("ff_sub.norm", "final_layer_norm", suffixes=WB),
)
CROSS = (
    row("cross_attn.q_proj", "encoder_attn.q_proj", suffixes=WB),
    row("cross_attn.kv_proj", "encoder_attn.k_proj", "encoder_attn.v_proj", suffixes=WB),
    row("cross_attn.o_proj", "encoder_attn.out_proj", suffixes=WB),
    row("cross_attn_sub.norm", "encoder_attn_layer_norm", suffixes=WB),
)


def _side(side: str) -> tuple[Row, ...]:
    """The rows of the `side` stack's positions and embedding norm."""
    return (
        row(f"{side}.positions.0.table.weight", f"model.{side}.embed_positions.weight"),
        row(f"{side}.embed_norm", f"model.{side}.layernorm_embedding", suffixes=WB),
    )


TABLE = Table(
    embed="model.shared.weight",
    top=(
        row("output_bias", "final_logits_bias", transform=ROW, optional=True),
        *_side("encoder"),
        *_side("decoder"),
    ),
    stacks=(
        Stack("encoder.layers.{i}.", "model.encoder.layers.{i}.", LAYER),
        Stack("decoder.layers.{i}.", "model.decoder.layers.{i}.", LAYER + CROSS, lambda cfg: cfg.decoder_layers),
    ),
    aliases={f"model.{side}.embed_tokens.weight": "model.shared.weight" for side in ("encoder", "decoder")},
)
# BART always has final_logits_bias (zeros reproduce a composition without) and may scale embeddings
OPTIONS = {"embed_norm": (True,), "offset": (OFFSET,), "output_bias": (True, False), "scale_embeddings": (True, False)}
COMPOSITION = Composition(
    "encoder_decoder", "learned", "post", "layernorm", tuple(HF_ACTIVATIONS), True, OPTIONS, checks=FULL_HEADS
)
# the encoder's sizes; the decoder's must equal them (zoo's stacks share one size)
FIELDS = fields(
    "d_model d_model",
    "n_heads encoder_attention_heads",
    "n_layers encoder_layers",
    "n_decoder_layers decoder_layers",
    "d_ff encoder_ffn_dim",
    "vocab_size vocab_size",
    "max_seq_len max_position_embeddings",
    "scale_embeddings scale_embedding",
)


def bart_keys(config: Any) -> dict[str, Any]:
    require(config, "activation_function", tuple(ACTIVATIONS))
    for name in ("add_final_layer_norm", "normalize_before", "add_bias_logits"):
        require(config, name, (False, None))
    require(config, "normalize_embedding", (True, None))
    for enc, dec in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if getattr(config, enc) != getattr(config, dec):
            raise UnsupportedConfig(
                f"{type(config).__name__}.{enc}={getattr(config, enc)} differs from "
                f"{dec}={getattr(config, dec)}; zoo's stacks share one size"
            )
    options = {"embed_norm": True, "output_bias": True, "scale_embeddings": bool(config.scale_embedding)}
    return COMPOSITION.keys(
        FIELDS.read(config),
        options,
        position={"kind": "learned", "offset": OFFSET},
        norm_eps=1e-5,
        activation=ACTIVATIONS[config.activation_function],
        tie_embeddings=True,
    )


def bart_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    if cfg.norm_eps != 1e-5:
        raise UnsupportedConfig(f"model.norm_eps={cfg.norm_eps}: BART's LayerNorms use 1e-5")
    return {
        **FIELDS.write(cfg),
        "decoder_attention_heads": cfg.n_heads,
        "decoder_ffn_dim": cfg.d_ff,
        "activation_function": HF_ACTIVATIONS[cfg.activation.value],
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "tie_word_embeddings": cfg.tie_embeddings,
    }


NAMES = ("bart", "BartForConditionalGeneration", "BartConfig")
DESCRIPTION = (
    "bart: encoder-decoder, learned positions with offset 2, post-LN layernorm, embed_norm, output_bias, "
    f"{ACTIVATIONS_LISTED}, biases"
)
BART = Family(NAMES, DESCRIPTION, COMPOSITION, (bart_keys, bart_hf_keys), TABLE, tie_from_weights=True)
