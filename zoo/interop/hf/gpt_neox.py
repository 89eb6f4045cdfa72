"""GPT-NeoX (Black et al. 2022) <-> zoo's decoder-only, RoPE, pre-LN LayerNorm composition with
biases, and `model.block=parallel_two_norms` (GPT-NeoX's `use_parallel_residual=True`:
x + attn(n1(x)) + ff(n2(x))) or `sequential` (its `use_parallel_residual=False`).

GPT-NeoX fuses q, k, v into one `query_key_value` whose rows are grouped by head (head 0's q,
k, v, then head 1's, ...); zoo's `qkv_proj` holds all queries, then all keys, then all values:
the rows are regrouped on the way in and out. Both rotate with the rotate-half pairing; only a
rotation of the whole head (`partial_rotary_factor=1.0`, GPT-NeoX's `rotary_pct`) is
reproduced."""

from __future__ import annotations

import torch

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import UnsupportedConfig, composed_as, load_exact, require
from zoo.interop.hf.llama import _rope
from zoo.models import build_model

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}
BLOCKS = {True: "parallel_two_norms", False: "sequential"}  # use_parallel_residual -> model.block
# one layer: zoo name -> GPT-NeoX name (weights and biases alike)
LAYER = {"self_attn.o_proj": "attention.dense", "ff.w_in": "mlp.dense_h_to_4h", "ff.w_out": "mlp.dense_4h_to_h",
         "self_attn_sub.norm": "input_layernorm", "ff_sub.norm": "post_attention_layernorm"}


def heads_to_blocks(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """GPT-NeoX's query_key_value rows (or bias), grouped by head as (H, 3, Dh), -> zoo's (3, H, Dh):
    (3·H·Dh, ...) -> (3·H·Dh, ...)."""
    rest = t.shape[1:]
    return t.reshape(n_heads, 3, -1, *rest).transpose(0, 1).reshape(t.shape)


def blocks_to_heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of `heads_to_blocks`: zoo's (3, H, Dh) rows -> GPT-NeoX's (H, 3, Dh)."""
    rest = t.shape[1:]
    return t.reshape(3, n_heads, -1, *rest).transpose(0, 1).reshape(t.shape)


class GptNeoxConverter:
    description = ("gpt_neox: decoder-only, rope, pre-LN layernorm, biases, relu/gelu/gelu_tanh, "
                   "block sequential or parallel_two_norms")

    @staticmethod
    def matches(cfg) -> bool:
        return (composed_as(cfg, {"block": tuple(BLOCKS.values())}, family="decoder_only", position="rope",
                            norm="pre", norm_type="layernorm", activation=tuple(HF_ACTIVATIONS))
                and cfg.bias and cfg.n_kv_heads == cfg.n_heads and cfg.head_dim * cfg.n_heads == cfg.d_model)

    def zoo_config(self, config):
        require(config, "hidden_act", tuple(ACTIVATIONS))
        require(config, "attention_bias", True, "zoo's model.bias sets the LayerNorm biases GPT-NeoX always has")
        factor = (getattr(config, "rope_parameters", None) or {}).get("partial_rotary_factor", 1.0)
        if factor != 1.0:
            raise UnsupportedConfig(f"{type(config).__name__}.partial_rotary_factor={factor} (rotary_pct) is not "
                                    f"supported (supported: 1.0): zoo's RoPE rotates the whole head")
        theta, scale = _rope(config)
        return ModelConfig(
            family="decoder_only", position={"kind": "rope", "theta": theta, "scale": scale},
            norm="pre", norm_type="layernorm", norm_eps=config.layer_norm_eps,
            activation=ACTIVATIONS[config.hidden_act], block=BLOCKS[bool(config.use_parallel_residual)],
            d_model=config.hidden_size, n_heads=config.num_attention_heads, n_layers=config.num_hidden_layers,
            d_ff=config.intermediate_size, vocab_size=config.vocab_size, max_seq_len=config.max_position_embeddings,
            dropout=0.0, tie_embeddings=bool(config.tie_word_embeddings), bias=True)

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config))
        cfg, sd = model.config, hf_model.state_dict()
        out = {"embed.weight": sd["gpt_neox.embed_in.weight"],
               "lm_head.weight": sd["lm_head.weight"],  # transformers 5's name of GPT-NeoX's embed_out
               "decoder.final_norm.weight": sd["gpt_neox.final_layer_norm.weight"],
               "decoder.final_norm.bias": sd["gpt_neox.final_layer_norm.bias"]}
        for i in range(cfg.n_layers):
            hf, z = f"gpt_neox.layers.{i}.", f"decoder.layers.{i}."
            for suffix in ("weight", "bias"):
                out[f"{z}self_attn.qkv_proj.{suffix}"] = heads_to_blocks(
                    sd[f"{hf}attention.query_key_value.{suffix}"], cfg.n_heads)  # (3·D, D) or (3·D,)
                for ours, theirs in LAYER.items():
                    out[f"{z}{ours}.{suffix}"] = sd[f"{hf}{theirs}.{suffix}"]
        load_exact(model, out)
        return model.eval()

    def hf_config(self, cfg):
        from transformers import GPTNeoXConfig

        rope = {"rope_type": "default", "rope_theta": cfg.position.theta, "partial_rotary_factor": 1.0}
        if cfg.position.scale != 1.0:
            rope.update(rope_type="linear", factor=cfg.position.scale)
        return GPTNeoXConfig(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads, intermediate_size=cfg.d_ff, hidden_act=HF_ACTIVATIONS[cfg.activation.value],
            rope_parameters=rope, max_position_embeddings=cfg.max_seq_len, layer_norm_eps=cfg.norm_eps,
            use_parallel_residual=cfg.block.value == "parallel_two_norms", attention_bias=True,
            hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=cfg.tie_embeddings,
            bos_token_id=None, eos_token_id=None, pad_token_id=None)

    def to_hf(self, model):
        from transformers import GPTNeoXForCausalLM

        cfg = model.config
        hf = GPTNeoXForCausalLM(self.hf_config(cfg))
        sd = model.state_dict()
        out = {"gpt_neox.embed_in.weight": sd["embed.weight"], "lm_head.weight": sd["lm_head.weight"],
               "gpt_neox.final_layer_norm.weight": sd["decoder.final_norm.weight"],
               "gpt_neox.final_layer_norm.bias": sd["decoder.final_norm.bias"]}
        for i in range(cfg.n_layers):
            hf_, z = f"gpt_neox.layers.{i}.", f"decoder.layers.{i}."
            for suffix in ("weight", "bias"):
                out[f"{hf_}attention.query_key_value.{suffix}"] = blocks_to_heads(
                    sd[f"{z}self_attn.qkv_proj.{suffix}"], cfg.n_heads)
                for ours, theirs in LAYER.items():
                    out[f"{hf_}{theirs}.{suffix}"] = sd[f"{z}{ours}.{suffix}"]
        load_exact(hf, out)
        return hf.eval()
