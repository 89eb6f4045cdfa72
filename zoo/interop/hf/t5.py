"""T5 (Raffel et al. 2020) v1.0 and v1.1 <-> zoo's `t5` composition: encoder-decoder, bucketed
relative position bias (one table per stack, in its first layer), pre-norm RMSNorm, no biases,
attention scores not scaled by 1/sqrt(Dh) (`attention_scale=1.0`).

v1.0: ReLU, output projection tied to the embedding, final hidden states scaled by D^-0.5
(`scale_output`). v1.1: tanh-GELU gated (`geglu_tanh`), untied, unscaled. Both variants, and
`gelu` / `gated-silu` (swiglu), convert; which one is read from the weights and the config.

A zoo model with the default attention scale exports exactly by folding 1/sqrt(Dh) into W_q."""

from __future__ import annotations

import torch

from zoo.config.facts.activations import ACTIVATION_FACTS
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import (
    ANY,
    UnsupportedConfig,
    attention_groups,
    composed_as,
    gather,
    load_exact,
    scatter,
    tied,
    untie,
)
from zoo.models import build_model

# T5Config.feed_forward_proj -> zoo activation
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gated-gelu": "geglu_tanh", "gated-silu": "swiglu"}
HF_ACTIVATIONS = {zoo: hf for hf, zoo in ACTIVATIONS.items()}


NAMES = {"q": "q", "k": "k", "v": "v", "o": "o"}
# T5 never scales the scores (export folds zoo's scale into W_q) and scales outputs or not
OPTIONS = {"attention_scale": ANY, "scale_output": (True, False)}


def _attention(prefix: str, zoo: str, cross: bool):
    return attention_groups(zoo, prefix, NAMES, ("weight",), cross)


class T5Converter:
    description = "t5: encoder-decoder, relative bias, pre-norm rmsnorm, " + "/".join(HF_ACTIVATIONS) + ", no biases"

    @staticmethod
    def matches(cfg) -> bool:
        return (
            composed_as(
                cfg,
                OPTIONS,
                family="encoder_decoder",
                position="relative",
                norm="pre",
                norm_type="rmsnorm",
                activation=tuple(HF_ACTIVATIONS),
            )
            and not cfg.bias
            and cfg.n_kv_heads == cfg.n_heads
        )

    def zoo_config(self, config, *, tie: bool = True):
        proj = getattr(config, "feed_forward_proj", None)
        if proj not in ACTIVATIONS:
            raise UnsupportedConfig(
                f"{type(config).__name__}.feed_forward_proj={proj!r} is not supported "
                f"(supported: {', '.join(map(repr, ACTIVATIONS))})"
            )
        # transformers 5 keeps v1.0's output scaling in its own field; 4.x tied it to tying
        scale = getattr(config, "scale_decoder_outputs", getattr(config, "tie_word_embeddings", True))
        return ModelConfig(
            family="encoder_decoder",
            position={
                "kind": "relative",
                "num_buckets": config.relative_attention_num_buckets,
                "max_distance": config.relative_attention_max_distance,
            },
            norm="pre",
            norm_type="rmsnorm",
            norm_eps=config.layer_norm_epsilon,
            activation=ACTIVATIONS[proj],
            d_model=config.d_model,
            n_heads=config.num_heads,
            head_dim=config.d_kv,
            n_layers=config.num_layers,
            n_decoder_layers=config.num_decoder_layers or config.num_layers,
            d_ff=config.d_ff,
            vocab_size=config.vocab_size,
            max_seq_len=getattr(config, "n_positions", None) or 512,
            dropout=0.0,
            tie_embeddings=tie,
            bias=False,
            attention_scale=1.0,
            scale_output=bool(scale),
        )

    @staticmethod
    def groups(cfg):
        """(zoo name, [T5 names]) of every weight; several T5 names are concatenated in order."""
        yield "embed.weight", ["shared.weight"]
        yield "lm_head.weight", ["lm_head.weight"]
        for side, n in (("encoder", cfg.n_layers), ("decoder", cfg.n_decoder_layers)):
            yield f"{side}.final_norm.weight", [f"{side}.final_layer_norm.weight"]
            yield (
                f"{side}.positions.0.table.weight",
                [f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
            )
            for i in range(n):
                t5, z = f"{side}.block.{i}.layer", f"{side}.layers.{i}"
                yield from _attention(f"{t5}.0.SelfAttention", f"{z}.self_attn", cross=False)
                yield f"{z}.self_attn_sub.norm.weight", [f"{t5}.0.layer_norm.weight"]
                ff = 1
                if side == "decoder":
                    yield from _attention(f"{t5}.1.EncDecAttention", f"{z}.cross_attn", cross=True)
                    yield f"{z}.cross_attn_sub.norm.weight", [f"{t5}.1.layer_norm.weight"]
                    ff = 2
                gated = ACTIVATION_FACTS[cfg.activation].gated
                dense = f"{t5}.{ff}.DenseReluDense"
                yield (
                    f"{z}.ff.w_in.weight",
                    [f"{dense}.wi_0.weight", f"{dense}.wi_1.weight"] if gated else [f"{dense}.wi.weight"],
                )
                yield f"{z}.ff.w_out.weight", [f"{dense}.wo.weight"]
                yield f"{z}.ff_sub.norm.weight", [f"{t5}.{ff}.layer_norm.weight"]

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config, tie=tied(hf_model)))
        load_exact(model, gather(hf_model.state_dict(), self.groups(model.config)))
        return model.eval()

    def to_hf(self, model):
        from transformers import T5Config, T5ForConditionalGeneration

        cfg = model.config
        hf_config = T5Config(
            vocab_size=cfg.vocab_size,
            d_model=cfg.d_model,
            d_kv=cfg.head_dim,
            d_ff=cfg.d_ff,
            num_layers=cfg.n_layers,
            num_decoder_layers=cfg.n_decoder_layers,
            num_heads=cfg.n_heads,
            relative_attention_num_buckets=cfg.position.num_buckets,
            relative_attention_max_distance=cfg.position.max_distance,
            dropout_rate=0.0,
            layer_norm_epsilon=cfg.norm_eps,
            feed_forward_proj=HF_ACTIVATIONS[cfg.activation.value],
            tie_word_embeddings=cfg.tie_embeddings,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
        if hasattr(hf_config, "scale_decoder_outputs"):
            hf_config.scale_decoder_outputs = cfg.scale_output  # transformers 5: independent of tying
        elif cfg.scale_output != cfg.tie_embeddings:
            raise UnsupportedConfig(
                "this transformers version scales T5 outputs exactly when embeddings "
                "are tied; model.scale_output must equal model.tie_embeddings"
            )
        hf = T5ForConditionalGeneration(hf_config)
        if not cfg.tie_embeddings:
            untie(hf)
        # T5 never scales the scores: fold zoo's scale (default 1/sqrt(Dh)) into the query rows
        q_scale = cfg.attention_scale if cfg.attention_scale is not None else cfg.head_dim**-0.5
        q_rows = cfg.n_heads * cfg.head_dim

        def fold(name, weight):
            if name.endswith(("self_attn.qkv_proj.weight", "cross_attn.q_proj.weight")) and q_scale != 1.0:
                return torch.cat([weight[:q_rows] * q_scale, weight[q_rows:]])  # (H·Dh + ..., D)
            return weight

        out = scatter(model.state_dict(), self.groups(cfg), hf, fold)
        for side in ("encoder", "decoder"):
            out[f"{side}.embed_tokens.weight"] = out["shared.weight"]
        load_exact(hf, out)
        return hf.eval()
