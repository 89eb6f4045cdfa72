"""BERT (Devlin et al. 2019) <-> zoo's `bert` composition: encoder-only, learned positions plus
token-type embeddings, LayerNorm over the summed embeddings (`embed_norm`), post-LN, the
masked-LM head's transform (`head_transform`) and output bias (`output_bias`).

The converted model is `BertForMaskedLM` (no pooler). q, k, v are fused into zoo's `qkv_proj`.
BERT always has token types and an output bias: zeros (`optional` rows) reproduce a zoo model
without."""

from __future__ import annotations

from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ACTIVATIONS, ACTIVATIONS_LISTED, ANY, HF_ACTIVATIONS, require
from zoo.interop.hf.table import FULL_HEADS, HIDDEN_FIELDS, WB, Composition, Family, Stack, Table, row

# BERT always has token types and an output bias: zeros reproduce a composition without
OPTIONS = {"embed_norm": (True,), "head_transform": (True,), "token_types": ANY, "output_bias": (True, False)}
COMPOSITION = Composition(
    "encoder_only", "learned", "post", "layernorm", tuple(HF_ACTIVATIONS), True, OPTIONS, checks=FULL_HEADS
)
FIELDS = HIDDEN_FIELDS.extended("norm_eps layer_norm_eps", "token_types type_vocab_size")
TABLE = Table(
    embed="bert.embeddings.word_embeddings.weight",
    lm_head="cls.predictions.decoder.weight",
    top=(
        row("encoder.positions.0.table.weight", "bert.embeddings.position_embeddings.weight"),
        row("token_type_embed.weight", "bert.embeddings.token_type_embeddings.weight", optional=True),
        row("encoder.embed_norm", "bert.embeddings.LayerNorm", suffixes=WB),
        row("head_transform.dense", "cls.predictions.transform.dense", suffixes=WB),
        row("head_transform.norm", "cls.predictions.transform.LayerNorm", suffixes=WB),
        row("output_bias", "cls.predictions.decoder.bias", optional=True),  # what the forward adds
    ),
    stacks=(
        Stack(
            "encoder.layers.{i}.",
            "bert.encoder.layer.{i}.",
            (
                row("self_attn.qkv_proj", *(f"attention.self.{p}" for p in ("query", "key", "value")), suffixes=WB),
                row("self_attn.o_proj", "attention.output.dense", suffixes=WB),
                row("self_attn_sub.norm", "attention.output.LayerNorm", suffixes=WB),
                row("ff.w_in", "intermediate.dense", suffixes=WB),
                row("ff.w_out", "output.dense", suffixes=WB),
                row("ff_sub.norm", "output.LayerNorm", suffixes=WB),
            ),
        ),
    ),
    aliases={"cls.predictions.bias": "cls.predictions.decoder.bias"},
)


def bert_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", tuple(ACTIVATIONS))
    require(config, "position_embedding_type", ("absolute", None))
    require(config, "is_decoder", (False, None))
    require(config, "add_cross_attention", (False, None))
    options = {"embed_norm": True, "head_transform": True, "output_bias": True}
    return COMPOSITION.keys(
        FIELDS.read(config), options, activation=ACTIVATIONS[config.hidden_act], tie_embeddings=True
    )


def bert_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    return {
        **FIELDS.write(cfg),
        "hidden_act": HF_ACTIVATIONS[cfg.activation.value],
        "type_vocab_size": max(cfg.token_types, 1),  # one row of zeros where zoo has none
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "pad_token_id": 0,
    }


NAMES = ("bert", "BertForMaskedLM", "BertConfig")
DESCRIPTION = f"bert: encoder-only, learned positions, post-LN layernorm, embed_norm, head_transform, {ACTIVATIONS_LISTED}, biases"
BERT = Family(NAMES, DESCRIPTION, COMPOSITION, (bert_keys, bert_hf_keys), TABLE, tie_from_weights=True)
