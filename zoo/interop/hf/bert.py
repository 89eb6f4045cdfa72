"""BERT (Devlin et al. 2019) <-> zoo's `bert` composition: encoder-only, learned positions plus
token-type embeddings, LayerNorm over the summed embeddings (`embed_norm`), post-LN, the
masked-LM head's transform (`head_transform`) and output bias (`output_bias`).

The converted model is `BertForMaskedLM` (no pooler). q, k, v are fused into zoo's `qkv_proj`."""

from __future__ import annotations

import torch

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, UnsupportedConfig, composed_as, load_exact, require, tied
from zoo.models import build_model

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}
# one layer: zoo name -> BERT name (weights and biases alike)
LAYER = {
    "self_attn.o_proj": "attention.output.dense",
    "self_attn_sub.norm": "attention.output.LayerNorm",
    "ff.w_in": "intermediate.dense",
    "ff.w_out": "output.dense",
    "ff_sub.norm": "output.LayerNorm",
}
TOP = {
    "embed.weight": "bert.embeddings.word_embeddings.weight",
    "encoder.positions.0.table.weight": "bert.embeddings.position_embeddings.weight",
    "encoder.embed_norm.weight": "bert.embeddings.LayerNorm.weight",
    "encoder.embed_norm.bias": "bert.embeddings.LayerNorm.bias",
    "head_transform.dense.weight": "cls.predictions.transform.dense.weight",
    "head_transform.dense.bias": "cls.predictions.transform.dense.bias",
    "head_transform.norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "head_transform.norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "lm_head.weight": "cls.predictions.decoder.weight",
    "output_bias": "cls.predictions.decoder.bias",
}  # what the forward adds (untied: not .bias)


OPTIONS = {"embed_norm": (True,), "head_transform": (True,), "token_types": ANY, "output_bias": (True, False)}


class BertConverter:
    description = (
        "bert: encoder-only, learned positions, post-LN layernorm, embed_norm, head_transform, "
        + "/".join(HF_ACTIVATIONS)
        + ", biases"
    )

    @staticmethod
    def matches(cfg) -> bool:
        # BERT always has token types and an output bias: zeros reproduce a composition without
        return (
            composed_as(
                cfg,
                OPTIONS,
                family="encoder_only",
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
        require(config, "hidden_act", tuple(ACTIVATIONS))
        require(config, "position_embedding_type", ("absolute", None))
        require(config, "is_decoder", (False, None))
        require(config, "add_cross_attention", (False, None))
        return ModelConfig(
            family="encoder_only",
            position={"kind": "learned"},
            norm="post",
            norm_type="layernorm",
            norm_eps=config.layer_norm_eps,
            activation=ACTIVATIONS[config.hidden_act],
            d_model=config.hidden_size,
            n_heads=config.num_attention_heads,
            n_layers=config.num_hidden_layers,
            d_ff=config.intermediate_size,
            vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings,
            dropout=0.0,
            tie_embeddings=tie,
            bias=True,
            embed_norm=True,
            token_types=config.type_vocab_size,
            head_transform=True,
            output_bias=True,
        )

    @staticmethod
    def pairs(n_layers: int):
        """(zoo name, BERT name) of every weight that maps one to one."""
        yield from TOP.items()
        for i in range(n_layers):
            for ours, theirs in LAYER.items():
                for suffix in ("weight", "bias"):
                    yield f"encoder.layers.{i}.{ours}.{suffix}", f"bert.encoder.layer.{i}.{theirs}.{suffix}"

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config, tie=tied(hf_model)))
        sd = hf_model.state_dict()
        out = {ours: sd[theirs] for ours, theirs in self.pairs(model.config.n_layers)}
        out["token_type_embed.weight"] = sd["bert.embeddings.token_type_embeddings.weight"]
        for i in range(model.config.n_layers):
            hf = f"bert.encoder.layer.{i}.attention.self."
            for suffix in ("weight", "bias"):
                out[f"encoder.layers.{i}.self_attn.qkv_proj.{suffix}"] = torch.cat(
                    [sd[f"{hf}{p}.{suffix}"] for p in ("query", "key", "value")]
                )  # (3·D, D) / (3·D,)
        load_exact(model, out)
        return model.eval()

    def to_hf(self, model):
        from transformers import BertConfig, BertForMaskedLM

        cfg = model.config
        if cfg.activation.value not in HF_ACTIVATIONS:
            raise UnsupportedConfig(f"model.activation={cfg.activation.value} has no BERT equivalent")
        hf = BertForMaskedLM(
            BertConfig(
                vocab_size=cfg.vocab_size,
                hidden_size=cfg.d_model,
                num_hidden_layers=cfg.n_layers,
                num_attention_heads=cfg.n_heads,
                intermediate_size=cfg.d_ff,
                hidden_act=HF_ACTIVATIONS[cfg.activation.value],
                max_position_embeddings=cfg.max_seq_len,
                type_vocab_size=max(cfg.token_types, 1),
                layer_norm_eps=cfg.norm_eps,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
                tie_word_embeddings=cfg.tie_embeddings,
                pad_token_id=0,
            )
        )
        sd = model.state_dict()
        out = {theirs: sd[ours] for ours, theirs in self.pairs(cfg.n_layers) if ours in sd}
        # options BERT always has: zeros where the zoo model has none (the same function)
        out["bert.embeddings.token_type_embeddings.weight"] = (
            sd["token_type_embed.weight"] if cfg.token_types else torch.zeros(1, cfg.d_model)
        )
        out.setdefault("cls.predictions.decoder.bias", torch.zeros(cfg.vocab_size))
        out["cls.predictions.bias"] = out["cls.predictions.decoder.bias"]
        for i in range(cfg.n_layers):
            hf_ = f"bert.encoder.layer.{i}.attention.self."
            for suffix in ("weight", "bias"):
                q, k, v = sd[f"encoder.layers.{i}.self_attn.qkv_proj.{suffix}"].chunk(3)
                out.update({f"{hf_}query.{suffix}": q, f"{hf_}key.{suffix}": k, f"{hf_}value.{suffix}": v})
        load_exact(hf, out)
        return hf.eval()
