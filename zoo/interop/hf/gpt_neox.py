"""GPT-NeoX (Black et al. 2022; Pythia) <-> zoo's decoder-only composition with RoPE, pre-LN
LayerNorm, a plain GELU (or ReLU) feed-forward and biases everywhere; attention and
feed-forward in parallel from two norms (`use_parallel_residual`: x + attn(norm1(x)) +
ff(norm2(x)), zoo's `model.block=parallel_two_norms`) or one after the other (`model.block=
sequential`).

GPT-NeoX fuses q, k, v into one `query_key_value` whose rows run head by head (for each head its
Dh query rows, then key rows, then value rows); zoo's `qkv_proj` has all query rows, then all
key rows, then all value rows: the rows are permuted on the way in and out. RoPE pairs
dimensions as rotate-half, as zoo does, but GPT-NeoX rotates only `partial_rotary_factor` of
each head (`rotary_pct`, 0.25 by default, as in Pythia); zoo rotates the whole head, so a
fraction other than 1.0 is refused."""

from __future__ import annotations

import torch

from zoo.config.schema.model import BlockKind, ModelConfig
from zoo.interop.hf.common import UnsupportedConfig, composed_as, hf_rope, load_exact, require, rope_of
from zoo.models import build_model

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}
BLOCKS = {True: "parallel_two_norms", False: "sequential"}  # use_parallel_residual -> model.block
# zoo name -> GPT-NeoX name, under one layer; each has a weight and a bias
LAYER = {
    "self_attn_sub.norm": "input_layernorm",
    "ff_sub.norm": "post_attention_layernorm",
    "self_attn.qkv_proj": "attention.query_key_value",
    "self_attn.o_proj": "attention.dense",
    "ff.w_in": "mlp.dense_h_to_4h",
    "ff.w_out": "mlp.dense_4h_to_h",
}


def by_kind(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """GPT-NeoX's head-by-head (q, k, v) rows -> zoo's q rows, k rows, v rows; t (3·H·Dh, ...)."""
    return t.reshape(n_heads, 3, -1, *t.shape[1:]).transpose(0, 1).reshape(t.shape)  # (H, 3, Dh, ...) -> (3, H, ...)


def by_head(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of `by_kind`: zoo's q, k, v rows -> GPT-NeoX's head by head."""
    return t.reshape(3, n_heads, -1, *t.shape[1:]).transpose(0, 1).reshape(t.shape)  # (3, H, Dh, ...) -> (H, 3, ...)


class GptNeoxConverter:
    description = (
        "gpt_neox: decoder-only, rope over the whole head, pre-LN layernorm, "
        + "/".join(HF_ACTIVATIONS)
        + f", biases, {BlockKind.parallel_two_norms.value} or {BlockKind.sequential.value} block"
    )

    @staticmethod
    def matches(cfg) -> bool:
        return (
            composed_as(
                cfg,
                {"block": tuple(BLOCKS.values())},
                family="decoder_only",
                position="rope",
                norm="pre",
                norm_type="layernorm",
                activation=tuple(HF_ACTIVATIONS),
            )
            and cfg.bias
            and cfg.n_kv_heads == cfg.n_heads
            and cfg.head_dim * cfg.n_heads == cfg.d_model
        )

    def zoo_config(self, config):
        require(config, "hidden_act", tuple(ACTIVATIONS))
        require(config, "attention_bias", (True, None), "zoo's biases are on every projection or on none")
        theta, scale = rope_of(config)
        return ModelConfig(
            family="decoder_only",
            position={"kind": "rope", "theta": theta, "scale": scale},
            norm="pre",
            norm_type="layernorm",
            norm_eps=config.layer_norm_eps,
            activation=ACTIVATIONS[config.hidden_act],
            block=BLOCKS[bool(config.use_parallel_residual)],
            d_model=config.hidden_size,
            n_heads=config.num_attention_heads,
            n_layers=config.num_hidden_layers,
            d_ff=config.intermediate_size,
            vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings,
            dropout=0.0,
            tie_embeddings=bool(config.tie_word_embeddings),
            bias=True,
        )

    @staticmethod
    def pairs(n_layers: int):
        """(zoo name, GPT-NeoX name) of every weight."""
        yield "embed.weight", "gpt_neox.embed_in.weight"
        yield "lm_head.weight", "lm_head.weight"
        for suffix in ("weight", "bias"):
            yield f"decoder.final_norm.{suffix}", f"gpt_neox.final_layer_norm.{suffix}"
        for i in range(n_layers):
            for ours, theirs in LAYER.items():
                for suffix in ("weight", "bias"):
                    yield f"decoder.layers.{i}.{ours}.{suffix}", f"gpt_neox.layers.{i}.{theirs}.{suffix}"

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config))
        H = model.config.n_heads
        sd = dict(hf_model.state_dict())
        sd.setdefault("lm_head.weight", sd["gpt_neox.embed_in.weight"])  # tied: saved once
        out = {
            ours: by_kind(sd[theirs], H) if ".qkv_proj." in ours else sd[theirs]
            for ours, theirs in self.pairs(model.config.n_layers)
        }
        load_exact(model, out)
        return model.eval()

    def hf_config(self, cfg):
        from transformers import GPTNeoXConfig

        if cfg.activation.value not in HF_ACTIVATIONS:
            raise UnsupportedConfig(f"model.activation={cfg.activation.value} has no GPT-NeoX equivalent")
        return GPTNeoXConfig(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            intermediate_size=cfg.d_ff,
            hidden_act=HF_ACTIVATIONS[cfg.activation.value],
            max_position_embeddings=cfg.max_seq_len,
            layer_norm_eps=cfg.norm_eps,
            tie_word_embeddings=cfg.tie_embeddings,
            use_parallel_residual=cfg.block.value == "parallel_two_norms",
            rope_parameters={**hf_rope(cfg.position), "partial_rotary_factor": 1.0},
            attention_bias=True,
            attention_dropout=0.0,
            hidden_dropout=0.0,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )

    def to_hf(self, model):
        from transformers import GPTNeoXForCausalLM

        cfg = model.config
        hf = GPTNeoXForCausalLM(self.hf_config(cfg))
        sd = model.state_dict()
        out = {
            theirs: by_head(sd[ours], cfg.n_heads) if ".qkv_proj." in ours else sd[ours]
            for ours, theirs in self.pairs(cfg.n_layers)
        }
        load_exact(hf, out)
        return hf.eval()
