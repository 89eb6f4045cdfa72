"""BART (Lewis et al. 2020) <-> zoo's encoder-decoder with learned positions (two rows before
position 0: `model.position.offset=2`), post-LN LayerNorm, LayerNorm over the embeddings of
each stack (`embed_norm`), biases, tied embeddings and a bias on the logits (`output_bias`,
BART's `final_logits_bias`). Encoder and decoder share one token table, as in BART."""

from __future__ import annotations

import torch

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import (
    UnsupportedConfig,
    attention_groups,
    composed_as,
    gather,
    load_exact,
    require,
    scatter,
    tied,
    untie,
)
from zoo.models import build_model

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}
OFFSET = 2  # BartLearnedPositionalEmbedding's offset
NORMS = {
    "self_attn_sub.norm": "self_attn_layer_norm",
    "cross_attn_sub.norm": "encoder_attn_layer_norm",
    "ff_sub.norm": "final_layer_norm",
}


NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}
# BART always has final_logits_bias (zeros reproduce a composition without) and may scale embeddings
OPTIONS = {"embed_norm": (True,), "offset": (OFFSET,), "output_bias": (True, False), "scale_embeddings": (True, False)}


def _attention(prefix: str, zoo: str, cross: bool):
    return attention_groups(zoo, prefix, NAMES, ("weight", "bias"), cross)


class BartConverter:
    description = (
        "bart: encoder-decoder, learned positions with offset 2, post-LN layernorm, embed_norm, "
        "output_bias, " + "/".join(HF_ACTIVATIONS) + ", biases"
    )

    @staticmethod
    def matches(cfg) -> bool:
        return (
            composed_as(
                cfg,
                OPTIONS,
                family="encoder_decoder",
                position="learned",
                norm="post",
                norm_type="layernorm",
                activation=tuple(HF_ACTIVATIONS),
            )
            and cfg.bias
            and cfg.n_kv_heads == cfg.n_heads
            and cfg.head_dim * cfg.n_heads == cfg.d_model
        )

    def zoo_config(self, config, *, tie: bool = True):
        require(config, "activation_function", tuple(ACTIVATIONS))
        for field in ("add_final_layer_norm", "normalize_before", "add_bias_logits"):
            require(config, field, (False, None))
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
        return ModelConfig(
            family="encoder_decoder",
            position={"kind": "learned", "offset": OFFSET},
            norm="post",
            norm_type="layernorm",
            norm_eps=1e-5,
            activation=ACTIVATIONS[config.activation_function],
            d_model=config.d_model,
            n_heads=config.encoder_attention_heads,
            n_layers=config.encoder_layers,
            n_decoder_layers=config.decoder_layers,
            d_ff=config.encoder_ffn_dim,
            vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings,
            dropout=0.0,
            tie_embeddings=tie,
            bias=True,
            scale_embeddings=bool(config.scale_embedding),
            embed_norm=True,
            output_bias=True,
        )

    @staticmethod
    def groups(cfg):
        """(zoo name, [BART names]) of every weight; several BART names are concatenated in order."""
        yield "embed.weight", ["model.shared.weight"]
        yield "lm_head.weight", ["lm_head.weight"]
        for side, n in (("encoder", cfg.n_layers), ("decoder", cfg.n_decoder_layers)):
            yield f"{side}.positions.0.table.weight", [f"model.{side}.embed_positions.weight"]
            for suffix in ("weight", "bias"):
                yield f"{side}.embed_norm.{suffix}", [f"model.{side}.layernorm_embedding.{suffix}"]
            for i in range(n):
                hf, z = f"model.{side}.layers.{i}", f"{side}.layers.{i}"
                yield from _attention(f"{hf}.self_attn", f"{z}.self_attn", cross=False)
                if side == "decoder":
                    yield from _attention(f"{hf}.encoder_attn", f"{z}.cross_attn", cross=True)
                for suffix in ("weight", "bias"):
                    yield f"{z}.ff.w_in.{suffix}", [f"{hf}.fc1.{suffix}"]
                    yield f"{z}.ff.w_out.{suffix}", [f"{hf}.fc2.{suffix}"]
                    for ours, theirs in NORMS.items():
                        if side == "decoder" or not ours.startswith("cross"):
                            yield f"{z}.{ours}.{suffix}", [f"{hf}.{theirs}.{suffix}"]

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config, tie=tied(hf_model)))
        sd = hf_model.state_dict()
        out = gather(sd, self.groups(model.config))
        out["output_bias"] = sd["final_logits_bias"][0]  # (1, V) -> (V,)
        load_exact(model, out)
        return model.eval()

    def to_hf(self, model):
        from transformers import BartConfig, BartForConditionalGeneration

        cfg = model.config
        if cfg.norm_eps != 1e-5:
            raise UnsupportedConfig(f"model.norm_eps={cfg.norm_eps}: BART's LayerNorms use 1e-5")
        hf = BartForConditionalGeneration(
            BartConfig(
                vocab_size=cfg.vocab_size,
                d_model=cfg.d_model,
                encoder_layers=cfg.n_layers,
                decoder_layers=cfg.n_decoder_layers,
                encoder_attention_heads=cfg.n_heads,
                decoder_attention_heads=cfg.n_heads,
                encoder_ffn_dim=cfg.d_ff,
                decoder_ffn_dim=cfg.d_ff,
                activation_function=HF_ACTIVATIONS[cfg.activation.value],
                max_position_embeddings=cfg.max_seq_len,
                scale_embedding=cfg.scale_embeddings,
                dropout=0.0,
                attention_dropout=0.0,
                activation_dropout=0.0,
                tie_word_embeddings=cfg.tie_embeddings,
            )
        )
        if not cfg.tie_embeddings:
            untie(hf)
        sd = model.state_dict()
        out = scatter(sd, self.groups(cfg), hf)
        for side in ("encoder", "decoder"):
            out[f"model.{side}.embed_tokens.weight"] = out["model.shared.weight"]
        bias = sd["output_bias"] if cfg.output_bias else torch.zeros(cfg.vocab_size)
        out["final_logits_bias"] = bias[None]  # (V,) -> (1, V)
        load_exact(hf, out)
        return hf.eval()
