"""Llama (Touvron et al. 2023) <-> zoo's `llama` composition: decoder-only, RoPE, pre-norm
RMSNorm, SwiGLU, grouped-query attention, no biases.

Weights map one to one, with two fusions on zoo's side: q, k, v projections are one
`qkv_proj` (rows q, then k, then v) and gate / up projections one `ff.w_in` (gate, then up).
Both use the rotate-half RoPE pairing, so q and k need no permutation."""

from __future__ import annotations

import torch

from zoo.interop.hf.common import composed_as, hf_rope, load_exact, require, rope_of
from zoo.config.schema.model import ModelConfig
from zoo.models import build_model


class LlamaConverter:
    description = "llama: decoder-only, rope, pre-norm rmsnorm, swiglu, no biases"

    @staticmethod
    def matches(cfg) -> bool:
        return (composed_as(cfg, family="decoder_only", position="rope", norm="pre", norm_type="rmsnorm",
                            activation="swiglu")
                and not cfg.bias)

    def zoo_config(self, config):
        require(config, "hidden_act", "silu")
        require(config, "attention_bias", (False, None))
        require(config, "mlp_bias", (False, None))
        require(config, "pretraining_tp", (1, None))
        theta, scale = rope_of(config)
        return ModelConfig(
            family="decoder_only", position={"kind": "rope", "theta": theta, "scale": scale},
            norm="pre", norm_type="rmsnorm", norm_eps=config.rms_norm_eps, activation="swiglu",
            d_model=config.hidden_size, n_heads=config.num_attention_heads,
            n_kv_heads=config.num_key_value_heads or config.num_attention_heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
            n_layers=config.num_hidden_layers, d_ff=config.intermediate_size, vocab_size=config.vocab_size,
            max_seq_len=config.max_position_embeddings, dropout=0.0,
            tie_embeddings=bool(config.tie_word_embeddings), bias=False)

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config))
        sd = hf_model.state_dict()
        out = {"embed.weight": sd["model.embed_tokens.weight"],
               "decoder.final_norm.weight": sd["model.norm.weight"],
               "lm_head.weight": sd.get("lm_head.weight", sd["model.embed_tokens.weight"])}
        for i in range(model.config.n_layers):
            hf, z = f"model.layers.{i}.", f"decoder.layers.{i}."
            out[z + "self_attn.qkv_proj.weight"] = torch.cat(
                [sd[hf + f"self_attn.{p}_proj.weight"] for p in "qkv"])  # (H·Dh + 2·Hkv·Dh, D)
            out[z + "self_attn.o_proj.weight"] = sd[hf + "self_attn.o_proj.weight"]
            out[z + "ff.w_in.weight"] = torch.cat(
                [sd[hf + "mlp.gate_proj.weight"], sd[hf + "mlp.up_proj.weight"]])  # (2·d_ff, D)
            out[z + "ff.w_out.weight"] = sd[hf + "mlp.down_proj.weight"]
            out[z + "self_attn_sub.norm.weight"] = sd[hf + "input_layernorm.weight"]
            out[z + "ff_sub.norm.weight"] = sd[hf + "post_attention_layernorm.weight"]
        load_exact(model, out)
        return model.eval()

    def hf_config(self, cfg):
        from transformers import LlamaConfig

        return LlamaConfig(
            vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
            num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim, hidden_act="silu", max_position_embeddings=cfg.max_seq_len,
            rms_norm_eps=cfg.norm_eps, tie_word_embeddings=cfg.tie_embeddings, rope_parameters=hf_rope(cfg.position),
            attention_bias=False, mlp_bias=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)

    def to_hf(self, model):
        from transformers import LlamaForCausalLM

        cfg = model.config
        hf = LlamaForCausalLM(self.hf_config(cfg))
        sd = model.state_dict()
        q_rows, kv_rows = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        out = {"model.embed_tokens.weight": sd["embed.weight"], "model.norm.weight": sd["decoder.final_norm.weight"],
               "lm_head.weight": sd["lm_head.weight"]}
        for i in range(cfg.n_layers):
            hf_, z = f"model.layers.{i}.", f"decoder.layers.{i}."
            q, k, v = sd[z + "self_attn.qkv_proj.weight"].split([q_rows, kv_rows, kv_rows])
            out.update({hf_ + "self_attn.q_proj.weight": q, hf_ + "self_attn.k_proj.weight": k,
                        hf_ + "self_attn.v_proj.weight": v,
                        hf_ + "self_attn.o_proj.weight": sd[z + "self_attn.o_proj.weight"]})
            gate, up = sd[z + "ff.w_in.weight"].chunk(2)
            out.update({hf_ + "mlp.gate_proj.weight": gate, hf_ + "mlp.up_proj.weight": up,
                        hf_ + "mlp.down_proj.weight": sd[z + "ff.w_out.weight"],
                        hf_ + "input_layernorm.weight": sd[z + "self_attn_sub.norm.weight"],
                        hf_ + "post_attention_layernorm.weight": sd[z + "ff_sub.norm.weight"]})
        load_exact(hf, out)
        return hf.eval()
