"""The attention half of a Qwen3-Next (Qwen team 2025) converter: its full-attention layers'
`Qwen3NextAttention` is zoo's attention with `model.qk_norm=head` and `model.attn_gate=elementwise`
(Qiu et al. 2025's gate), the gate fused into the query projection.

transformers' `self_attn.q_proj.weight` (H·2·Dh, D) holds, for each head h in turn, that head's
Dh query rows and then its Dh gate rows (viewed (H, 2, Dh, D)); the output is multiplied by
sigmoid(gate) per head dimension before `o_proj`. zoo holds the query rows in `qkv_proj` (rows q,
then k, then v) and the gate rows in `gate.proj` ((H·Dh, D), head-major): `split_query_gate` and
`join_query_gate` move between the two (a bias, with `attention_bias`, alike as (H·2·Dh,)).
Qwen3-Next's RMSNorm is x/rms(x)·(1 + w): zoo's norm weight is w + 1 (`PLUS_ONE`).

The whole-model converter (`zoo.interop.hf.qwen3next`) moves the rows with these two functions;
`tests/interop/test_hf_qwen3_next.py` checks the attention alone against transformers' with them."""

from __future__ import annotations

import torch


def split_query_gate(fused: torch.Tensor, n_heads: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q_proj's (H·2·Dh, ...) -> (the query rows (H·Dh, ...), the gate rows (H·Dh, ...))."""
    per_head = fused.reshape(n_heads, 2, head_dim, *fused.shape[1:])  # (H, 2, Dh, ...)
    rest = fused.shape[1:]
    return per_head[:, 0].reshape(n_heads * head_dim, *rest), per_head[:, 1].reshape(n_heads * head_dim, *rest)


def join_query_gate(query: torch.Tensor, gate: torch.Tensor, n_heads: int, head_dim: int) -> torch.Tensor:
    """The inverse of `split_query_gate`: (H·Dh, ...) each -> q_proj's (H·2·Dh, ...)."""
    rest = query.shape[1:]
    q, g = query.reshape(n_heads, head_dim, *rest), gate.reshape(n_heads, head_dim, *rest)  # (H, Dh, ...)
    return torch.stack([q, g], dim=1).reshape(n_heads * 2 * head_dim, *rest)  # (H·2·Dh, ...)
