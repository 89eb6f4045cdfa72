"""The attention half of a DeepSeek-V3 converter: transformers' `DeepseekV3Attention` weights and
config fields <-> zoo's multi-head latent attention (`zoo.nn.latent_attention`, model.kv=latent),
as rows a `zoo.interop.hf.table.Stack` takes (names relative to a layer's prefix).

Names map one to one (q_proj; q_a_proj, q_a_layernorm -> q_a_norm, q_b_proj; kv_a_proj_with_mqa
-> kv_a_proj, kv_a_layernorm -> kv_a_norm, kv_b_proj; o_proj), biases where `attention_bias`
puts them (q_a_proj, kv_a_proj_with_mqa, o_proj). One layout differs: DeepSeek's checkpoints
lay each RoPE part out in interleaved pairs (x0, x1), (x2, x3), ... (`rope_interleave=True`,
transformers' `apply_rotary_pos_emb_interleave`), where zoo rotates dimension i with i + d_r/2
(rotate-half). The rotation of interleaved x equals rotate-half's of its de-interleaved
[x0, x2, ..., x1, x3, ...], and a score is a dot product of a query's and a key's parts laid out
alike, so importing de-interleaves the rows that make the RoPE parts (the last d_r rows of each
head's query block, the last d_r rows of kv_a_proj_with_mqa) and exporting interleaves them back,
with `rope_interleave=True` in the config written.

`tests/nn/test_latent_attention.py` loads these rows into a zoo layer from a random
`DeepseekV3Attention` and compares the outputs. The whole model's converter
(`zoo.interop.hf.deepseek_v3`) joins them with the DeepSeek mixture's rows
(`zoo.interop.hf.deepseek_moe`).
"""

from __future__ import annotations

from typing import Any

import torch

from zoo.config.facts.kv import latent_widths
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import require
from zoo.interop.hf.table import IDENTITY, Row, Transform, row


def _rope_order(d_r: int) -> torch.Tensor:
    """The de-interleaving permutation of d_r dimensions: [0, 2, ..., 1, 3, ...]."""
    return torch.cat([torch.arange(0, d_r, 2), torch.arange(1, d_r, 2)])


def _heads_rope(t: torch.Tensor, cfg: ModelConfig, order_of) -> torch.Tensor:
    """The query projection's rows (H·d_qk, ...) with each head's last d_r rows reordered."""
    w = latent_widths(cfg)
    heads = t.reshape(cfg.n_heads, w.qk, *t.shape[1:])  # (H, d_qk, ...)
    rope = heads[:, w.nope :][:, order_of(w.rope)]  # (H, d_r, ...)
    return torch.cat([heads[:, : w.nope], rope], dim=1).reshape(t.shape)  # (H·d_qk, ...)


def _latent_rope(t: torch.Tensor, cfg: ModelConfig, order_of) -> torch.Tensor:
    """kv_a_proj's rows (r + d_r, ...) with the last d_r rows reordered."""
    w = latent_widths(cfg)
    return torch.cat([t[: w.rank], t[w.rank :][order_of(w.rope)]])


def _interleave_order(d_r: int) -> torch.Tensor:
    return torch.argsort(_rope_order(d_r))


QUERY_ROPE = Transform(
    "query_rope_deinterleaved",
    lambda t, cfg: _heads_rope(t, cfg, _rope_order),
    lambda t, cfg: _heads_rope(t, cfg, _interleave_order),
)
LATENT_ROPE = Transform(
    "latent_rope_deinterleaved",
    lambda t, cfg: _latent_rope(t, cfg, _rope_order),
    lambda t, cfg: _latent_rope(t, cfg, _interleave_order),
)


def _one_query_projection(cfg: ModelConfig, layer: int) -> bool:
    return cfg.q_lora_rank is None


def _query_latent(cfg: ModelConfig, layer: int) -> bool:
    return cfg.q_lora_rank is not None


def _biased(cfg: ModelConfig, layer: int) -> bool:
    return cfg.bias


def _query_latent_biased(cfg: ModelConfig, layer: int) -> bool:
    return cfg.q_lora_rank is not None and cfg.bias


def _bias_rows(*pairs: tuple[str, str, Transform]) -> tuple[Row, ...]:
    return tuple(row(f"{ours}.bias", f"{theirs}.bias", transform=t, when=_biased) for ours, theirs, t in pairs)


ATTENTION_ROWS: tuple[Row, ...] = (
    row("self_attn.q_proj.weight", "self_attn.q_proj.weight", transform=QUERY_ROPE, when=_one_query_projection),
    row("self_attn.q_a_proj.weight", "self_attn.q_a_proj.weight", when=_query_latent),
    row("self_attn.q_a_proj.bias", "self_attn.q_a_proj.bias", when=_query_latent_biased),
    row("self_attn.q_a_norm.weight", "self_attn.q_a_layernorm.weight", when=_query_latent),
    row("self_attn.q_b_proj.weight", "self_attn.q_b_proj.weight", transform=QUERY_ROPE, when=_query_latent),
    row("self_attn.kv_a_proj.weight", "self_attn.kv_a_proj_with_mqa.weight", transform=LATENT_ROPE),
    row("self_attn.kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"),
    row("self_attn.kv_b_proj.weight", "self_attn.kv_b_proj.weight"),
    row("self_attn.o_proj.weight", "self_attn.o_proj.weight"),
    *_bias_rows(
        ("self_attn.kv_a_proj", "self_attn.kv_a_proj_with_mqa", LATENT_ROPE),
        ("self_attn.o_proj", "self_attn.o_proj", IDENTITY),
    ),
)


def attention_keys(config: Any) -> dict[str, Any]:
    """The ModelConfig keys of a `DeepseekV3Config`'s attention (its RoPE is the family's);
    UnsupportedConfig for RoPE parts laid out as rotate-half (the rows are de-interleaved)."""
    require(config, "rope_interleave", True, "the RoPE rows are read as DeepSeek lays them out, in pairs")
    return {
        "kv": "latent",
        "q_lora_rank": config.q_lora_rank,
        "kv_lora_rank": config.kv_lora_rank,
        "qk_nope_head_dim": config.qk_nope_head_dim,
        "qk_rope_head_dim": config.qk_rope_head_dim,
        "v_head_dim": config.v_head_dim,
        "bias": bool(config.attention_bias),
    }


def hf_attention_keys(cfg: ModelConfig) -> dict[str, Any]:
    """The `DeepseekV3Config` arguments of a zoo config's latent attention."""
    w = latent_widths(cfg)
    return {
        "num_key_value_heads": cfg.n_heads,
        "q_lora_rank": w.q_rank,
        "kv_lora_rank": w.rank,
        "qk_nope_head_dim": w.nope,
        "qk_rope_head_dim": w.rope,
        "v_head_dim": w.v,
        "attention_bias": cfg.bias,
        "rope_interleave": True,  # the rows are interleaved on the way out
        "attention_dropout": 0.0,
    }
