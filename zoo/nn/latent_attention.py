"""Multi-head latent attention (MLA; DeepSeek-AI 2024, "DeepSeek-V2", §2.1, as transformers'
`DeepseekV3Attention` computes it): every head's keys and values are expanded from one low-rank
latent per token, and a key part shared by the heads carries RoPE (the decoupled key). The
widths and what each projection holds are the row of `zoo.config.facts.kv.KV_FACTS`
(model.kv=latent); shapes: H heads, r = kv_lora_rank, d_n = qk_nope_head_dim, d_r =
qk_rope_head_dim, d_v = v_head_dim, d_qk = d_n + d_r.

The KV cache holds what the latent form needs, not the expanded keys and values: the normed
latent c (B, 1, S, r) in a cache's key slot and the rotated shared key k_r (B, 1, S, d_r) in its
value slot, so every cache of `zoo.nn.cache` (growing, static, sliding) serves it as it is.

Two forms compute the same attention:

- expanded (a forward without a cache, as in training): W_kvb c gives each head's k_n and v,
  scores over [q_n, q_r]·[k_n, k_r], values v; what `zoo.config.schema.flops` counts;
- absorbed (with a cache, prompt and decoding steps): W_uk (W_kvb's key rows) is folded into the
  queries, q_n·k_n = (W_ukᵀ q_n)·c, so every head attends to the cached [c, k_r] as one shared
  key/value head of width r + d_r, values c; W_uv (its value rows) then maps each head's
  weighted latent to d_v. No key or value is expanded per head while decoding.

`tests/nn/test_latent_attention.py` checks the two against each other through the caches and
the expanded form against transformers' module.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from zoo.config.facts.kv import latent_widths
from zoo.config.facts.positions import POSITION_FACTS, PositionKind
from zoo.config.schema.model import ModelConfig
from zoo.nn.attention import attention
from zoo.nn.cache import LayerCache
from zoo.nn.flex import dense, is_block_mask
from zoo.nn.logit_stats import max_attention_logit
from zoo.nn.norm import build_norm
from zoo.nn.position.base import PositionScheme
from zoo.nn.position.rope import RotaryPositions


class LatentAttention(nn.Module):
    """Self-attention with keys and values from a latent (see the module docstring).

    Shapes: x (B, T, D) -> (B, T, D).
    """

    cross = False  # self-attention only (a decoder's cross-attention stays per-head)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        D, H, w = cfg.d_model, cfg.n_heads, latent_widths(cfg)
        self.n_heads, self.kv_lora_rank = H, w.rank
        self.nope, self.rope_dim, self.v_dim, self.qk_dim = w.nope, w.rope, w.v, w.qk
        if w.q_rank is None:
            self.q_proj = nn.Linear(D, H * self.qk_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(D, w.q_rank, bias=cfg.bias)
            self.q_a_norm = build_norm(cfg.norm_type, w.q_rank, cfg.norm_eps, cfg.bias)
            self.q_b_proj = nn.Linear(w.q_rank, H * self.qk_dim, bias=False)
        self.kv_a_proj = nn.Linear(D, self.kv_lora_rank + self.rope_dim, bias=cfg.bias)
        self.kv_a_norm = build_norm(cfg.norm_type, self.kv_lora_rank, cfg.norm_eps, cfg.bias)
        self.kv_b_proj = nn.Linear(self.kv_lora_rank, H * (self.nope + self.v_dim), bias=False)
        self.o_proj = nn.Linear(H * self.v_dim, D, bias=cfg.bias)
        # RoPE over the d_r dimensions of the shared key and of each query (model.position's own
        # parameters); a layer whose scheme is not rope leaves them as projected
        position = cfg.position
        self.rope = (
            RotaryPositions(
                head_dim=self.rope_dim,
                **{name: getattr(position, name) for name in POSITION_FACTS[PositionKind.rope].params},
            )
            if position.kind == PositionKind.rope
            else None
        )
        self.dropout = cfg.dropout
        # multiplier of q·kᵀ: model.attention_scale, or 1/sqrt(d_qk) (transformers' softmax_scale)
        self.scale = cfg.attention_scale if cfg.attention_scale is not None else 1.0 / math.sqrt(self.qk_dim)
        self.softcap = cfg.attn_softcap
        self.keep_weights = False  # as `zoo.nn.attention.Attention`: inspection and the logit monitor
        self.last_weights: torch.Tensor | None = None
        self.record_max_logit = False
        self.last_max_logit: torch.Tensor | None = None

    def _queries(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) -> queries (B, H, T, d_qk)."""
        B, T, _ = x.shape
        q = self.q_proj(x) if hasattr(self, "q_proj") else self.q_b_proj(self.q_a_norm(self.q_a_proj(x)))
        return q.view(B, T, self.n_heads, self.qk_dim).transpose(1, 2)  # (B, H, T, d_qk)

    def _expanded(self, latent: torch.Tensor, k_rope: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """latent (B, S, r), k_rope (B, 1, S, d_r) -> keys (B, H, S, d_qk), values (B, H, S, d_v)."""
        B, S, _ = latent.shape
        kv = (
            self.kv_b_proj(latent).view(B, S, self.n_heads, self.nope + self.v_dim).transpose(1, 2)
        )  # (B, H, S, d_n + d_v)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)  # (B, H, S, d_n), (B, H, S, d_v)
        k = torch.cat([k_nope, k_rope.expand(B, self.n_heads, S, self.rope_dim)], dim=-1)  # (B, H, S, d_qk)
        return k, v

    def _absorbed_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W_kvb's key and value rows per head: W_uk (H, d_n, r), W_uv (H, d_v, r)."""
        w = self.kv_b_proj.weight.view(self.n_heads, self.nope + self.v_dim, self.kv_lora_rank)  # (H, d_n + d_v, r)
        w_uk, w_uv = w.split([self.nope, self.v_dim], dim=1)
        return w_uk, w_uv

    def forward(
        self,
        x: torch.Tensor,
        *,
        positions: torch.Tensor,
        position: PositionScheme,
        mask: torch.Tensor | None,
        causal: bool = False,
        memory: torch.Tensor | None = None,
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        B, T, _ = x.shape
        q = self._queries(x)  # (B, H, T, d_qk)
        q_nope, q_rope = q.split([self.nope, self.rope_dim], dim=-1)  # (B, H, T, d_n), (B, H, T, d_r)
        latent, k_rope = self.kv_a_proj(x).split([self.kv_lora_rank, self.rope_dim], dim=-1)  # (B, T, r), (B, T, d_r)
        latent = self.kv_a_norm(latent)
        k_rope = k_rope[:, None]  # (B, 1, T, d_r)
        rotary = self.rope is not None and getattr(position, "kind", None) == PositionKind.rope
        if rotary:
            assert self.rope is not None
            cos_sin = self.rope.angles(positions, q.dtype)
            q_rope, k_rope = self.rope.rotate(q_rope, positions, cos_sin), self.rope.rotate(k_rope, positions, cos_sin)
        k_positions = positions
        if cache is None:
            k, v = self._expanded(latent, k_rope)  # (B, H, T, d_qk), (B, H, T, d_v)
            q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, T, d_qk)
            w_uv = None
        else:
            # the cache keeps the latent and the rotated shared key (B, 1, S, r), (B, 1, S, d_r)
            cached, k_rope, k_positions = cache.self_attn.update(latent[:, None], k_rope, positions)
            w_uk, w_uv = self._absorbed_weights()
            q_latent = torch.einsum("bhtn,hnr->bhtr", q_nope, w_uk)  # (B, H, T, r)
            q = torch.cat([q_latent, q_rope], dim=-1)  # (B, H, T, r + d_r)
            k = torch.cat([cached, k_rope], dim=-1)  # (B, 1, S, r + d_r): one head shared by all
            v = cached  # (B, 1, S, r)
        bias = None
        if not rotary:  # identity, or a bias from the positions alone (shaw is refused)
            q, k, bias = position.attend(q, k, positions, k_positions)
        if self.record_max_logit:
            seen = dense(mask, q.shape[2], k.shape[2], q.device) if is_block_mask(mask) else mask  # (1, 1, T, S)
            self.last_max_logit = max_attention_logit(q, k, scale=self.scale, mask=seen, causal=causal)
        out, weights = attention(
            q,
            k,
            v,
            mask=mask,
            bias=bias,
            causal=causal,
            scale=self.scale,
            dropout=self.dropout if self.training else 0.0,
            math_path=self.keep_weights,
            softcap=self.softcap,
        )  # (B, H, T, d_v), or absorbed (B, H, T, r)
        if w_uv is not None:
            out = torch.einsum("bhtr,hvr->bhtv", out, w_uv)  # (B, H, T, d_v)
        if self.keep_weights:
            self.last_weights = None if weights is None else weights.detach()
        out = out.transpose(1, 2).reshape(B, T, self.n_heads * self.v_dim)  # (B, T, H·d_v)
        return self.o_proj(out)
