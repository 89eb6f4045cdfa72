"""Multi-head attention (Vaswani et al. 2017) with grouped-query / multi-query key-value heads
(Ainslie et al. 2023; Shazeer 2019), padding and causal masks, a KV cache, every position
scheme through its `attend` / `value_term` hooks, an optional norm of queries and keys
(QK-norm: per head as Qwen3, or over the whole projection as OLMo 2), an optional tanh
soft-cap of the scores (Gemma 2), an optional sink logit in each head's softmax (gpt-oss;
`zoo.nn.sink`) and an optional sigmoid gate on each head's output (Qiu et al. 2025;
`zoo.nn.gate`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.facts.blocks import QKNorm
from zoo.config.facts.heads import AttnGate, AttnSink
from zoo.config.schema.model import NormType
from zoo.nn.cache import LayerCache
from zoo.nn.documents import FLEX_MIN_HEAD_DIM, DocumentMask, takes_flex
from zoo.nn.documents import attend as flex_attend
from zoo.nn.flex import dense, flex, is_block_mask
from zoo.nn.gate import HeadGate
from zoo.nn.logit_stats import max_attention_logit
from zoo.nn.norm import build_norm
from zoo.nn.position.base import PositionScheme
from zoo.nn.sink import AttentionSink, with_sink


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | DocumentMask | None = None,
    bias: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    dropout: float = 0.0,
    math_path: bool = False,
    softcap: float | None = None,
    sink: torch.Tensor | None = None,
):
    """softmax(q·kᵀ · scale + bias, masked) · v; with `softcap` c, softmax(c·tanh(q·kᵀ · scale / c)
    + bias, masked) · v (Gemma 2's order: the cap after the scale, before the mask).

    q (B, H, T, Dh); k, v (B, Hkv, S, Dh) with H a multiple of Hkv; mask (B or 1, 1, T, S)
    boolean, True = may attend (or a FlexAttention BlockMask, `zoo.nn.flex`); bias broadcastable to (B, H, T, S), added to the scaled scores;
    `causal` adds a causal mask, with the T queries being the last T of the S keys.

    Returns (out (B, H, T, Dh), weights (B, H, T, S) or None). The default path is
    `scaled_dot_product_attention`; `math_path=True` computes the weights explicitly (for
    schemes that need them and for inspection) and is tested against it. A `DocumentMask`
    (packed documents) takes FlexAttention where its kernel is flex and no bias, weights or
    dropout are asked for (`zoo.nn.documents.takes_flex`), its boolean form otherwise. A
    soft-cap runs the math path (SDPA's fused kernels take no function of the scores). `sink`
    (H,) adds exp(sink_h) to each head's softmax denominator, on either path (`zoo.nn.sink`).
    """
    math_path = math_path or softcap is not None
    H, Hkv = q.shape[1], k.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if is_block_mask(mask):  # a sliding layer's band for FlexAttention (`zoo.nn.flex.use_flex`)
        narrow = q.shape[-1] < FLEX_MIN_HEAD_DIM and q.device.type != "cpu"  # the GPU lowering refuses it
        if not math_path and bias is None and sink is None and not narrow:
            return flex(q, k, v, mask, scale), None  # (B, H, T, Dh)
        mask = dense(mask, q.shape[2], k.shape[2], q.device)  # (1, 1, T, S): the weights are wanted
    if isinstance(mask, DocumentMask):
        if sink is None and takes_flex(mask, bias=bias, math_path=math_path, dropout=dropout, head_dim=q.shape[-1]):
            return flex_attend(q, k, v, mask, scale=scale), None  # (B, H, T, Dh)
        mask = mask.dense()  # (B, 1, T, S)
    T, S = q.shape[2], k.shape[2]
    if causal and (bias is not None or mask is not None or math_path or T != S or sink is not None):
        # SDPA's is_causal aligns the top-left corner; the queries here are the last T keys
        keep = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)[None, None]  # (1, 1, T, S)
        mask = keep if mask is None else mask & keep
        causal = False
    if sink is not None:  # one more key column: a zero key and value, its score the sink logit
        k, v, mask, bias = with_sink(sink, k, v, mask=mask, bias=bias, T=T)  # (B, Hkv, S + 1, Dh)
    if math_path:
        if Hkv != H:
            k = k.repeat_interleave(H // Hkv, dim=1)  # (B, H, S, Dh)
            v = v.repeat_interleave(H // Hkv, dim=1)  # (B, H, S, Dh)
        scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, S)
        if softcap is not None:
            scores = softcap * torch.tanh(scores / softcap)
        if bias is not None:
            scores = scores + bias
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (B, H, T, S)
        dropped = F.dropout(weights, p=dropout) if dropout > 0 else weights
        return dropped @ v, dropped[..., :S]  # (B, H, T, Dh), the weights as applied (no sink column)

    attn_mask = mask
    if bias is not None:
        attn_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout,
        is_causal=causal,
        scale=scale,
        enable_gqa=Hkv != H,
    )  # (B, H, T, Dh)
    return out, None


_KEYS_DONE = PositionScheme()  # identity: q and the cached keys are already transformed


class Attention(nn.Module):
    """Self-attention (queries, keys and values from x; one fused projection) or
    cross-attention (queries from x, keys and values from the encoder memory).

    Shapes: x (B, T, D), memory (B, S, D) -> (B, T, D).
    """

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        n_kv_heads: int,
        head_dim: int,
        bias: bool,
        dropout: float,
        cross: bool = False,
        scale: float | None = None,
        qk_norm: QKNorm = QKNorm.none,
        qk_norm_type: NormType = NormType.rmsnorm,
        norm_eps: float = 1e-6,
        softcap: float | None = None,
        sink: AttnSink = AttnSink.none,
        gate: AttnGate = AttnGate.none,
    ) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.cross = cross
        self.dropout = dropout
        q_dim, kv_dim = n_heads * head_dim, n_kv_heads * head_dim
        if cross:
            self.q_proj = nn.Linear(d_model, q_dim, bias=bias)
            self.kv_proj = nn.Linear(d_model, 2 * kv_dim, bias=bias)
        else:
            self.qkv_proj = nn.Linear(d_model, q_dim + 2 * kv_dim, bias=bias)
        self.o_proj = nn.Linear(q_dim, d_model, bias=bias)
        # QK-norm: over each head's Dh (head) or the whole projection (projection), before positions
        self.qk_norm = qk_norm
        if qk_norm != QKNorm.none:
            per_head = qk_norm == QKNorm.head
            self.q_norm = build_norm(qk_norm_type, head_dim if per_head else q_dim, norm_eps, bias)
            self.k_norm = build_norm(qk_norm_type, head_dim if per_head else kv_dim, norm_eps, bias)
        self.softcap = softcap  # c of c·tanh(s/c) on the scaled scores; None: no cap
        self.scale = scale  # multiplier of q·kᵀ; None: 1/sqrt(Dh) (μP: `ModelConfig.attention_multiplier`)
        self.sink = AttentionSink(sink, n_heads) if sink != AttnSink.none else None  # model.attn_sink
        self.gate = (
            HeadGate(gate, d_model=d_model, n_heads=n_heads, head_dim=head_dim, bias=bias)
            if gate != AttnGate.none
            else None
        )
        self.keep_weights = False  # set True to record `last_weights` (inspection only)
        self.last_weights: torch.Tensor | None = None
        self.record_max_logit = False  # set True to record `last_max_logit` (the instability monitor)
        self.last_max_logit: torch.Tensor | None = None  # max scaled q·kᵀ a query may attend, detached

    def _heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, n, self.head_dim).transpose(1, 2)  # (B, n, T, Dh)

    def _qk_heads(self, x: torch.Tensor, n: int, norm: str) -> torch.Tensor:
        """Queries or keys (B, T, n·Dh) -> (B, n, T, Dh), through `norm` ("q_norm" or "k_norm")
        where model.qk_norm asks: over the whole n·Dh before the split into heads (projection),
        over each head's Dh after it (head)."""
        if self.qk_norm == QKNorm.projection:
            x = getattr(self, norm)(x)
        heads = self._heads(x, n)  # (B, n, T, Dh)
        return getattr(self, norm)(heads) if self.qk_norm == QKNorm.head else heads

    def _memory_kv(self, memory: torch.Tensor):
        k, v = self.kv_proj(memory).chunk(2, dim=-1)  # (B, S, Hkv·Dh) each
        return self._qk_heads(k, self.n_kv_heads, "k_norm"), self._heads(v, self.n_kv_heads)  # (B, Hkv, S, Dh)

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
        values: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """`values`: a hook on the self-attention's values (B, Hkv, T, Dh) of the new tokens,
        before the KV cache keeps them (`zoo.nn.values`: value residual, value embeddings)."""
        B, T, _ = x.shape
        H, Hkv, Dh = self.n_heads, self.n_kv_heads, self.head_dim
        if self.cross:
            q = self._qk_heads(self.q_proj(x), H, "q_norm")  # (B, H, T, Dh)
            if cache is not None and cache.cross_kv is not None:
                k, v = cache.cross_kv
            else:
                if memory is None:
                    raise ValueError("cross-attention needs the encoder's output (memory)")
                k, v = self._memory_kv(memory)  # (B, Hkv, S, Dh)
                if cache is not None:
                    cache.cross_kv = (k, v)
            k_positions = None  # cross-attention takes no position scheme (the block passes none)
        else:
            q, k, v = self.qkv_proj(x).split([H * Dh, Hkv * Dh, Hkv * Dh], dim=-1)
            q = self._qk_heads(q, H, "q_norm")  # (B, H, T, Dh)
            k = self._qk_heads(k, Hkv, "k_norm")  # (B, Hkv, T, Dh)
            v = self._heads(v, Hkv)  # (B, Hkv, T, Dh)
            if values is not None:
                v = values(v)  # (B, Hkv, T, Dh)
            k_positions = positions
            if cache is not None and position.keys_transformed_alone:
                q, k, _ = position.attend(q, k, positions, positions)  # only the new keys: (B, Hkv, T, Dh)
                k, v, k_positions = cache.self_attn.update(k, v, positions)  # (B, Hkv, S, Dh)
                position = _KEYS_DONE
            elif cache is not None:
                k, v, k_positions = cache.self_attn.update(k, v, positions)  # (B, Hkv, S, Dh)
        q, k, bias = position.attend(q, k, positions, k_positions)
        if self.record_max_logit:
            seen = dense(mask, q.shape[2], k.shape[2], q.device) if is_block_mask(mask) else mask  # (1, 1, T, S)
            self.last_max_logit = max_attention_logit(q, k, scale=self.scale, mask=seen, causal=causal)
        need_weights = position.needs_attention_weights or self.keep_weights
        out, weights = attention(
            q,
            k,
            v,
            mask=mask,
            bias=bias,
            causal=causal,
            scale=self.scale,
            dropout=self.dropout if self.training else 0.0,
            math_path=need_weights,
            softcap=self.softcap,
            sink=None if self.sink is None else self.sink(q),
        )  # (B, H, T, Dh)
        if position.needs_attention_weights:
            out = out + position.value_term(weights, positions, k_positions)
        if self.keep_weights:
            self.last_weights = weights.detach()
        if self.gate is not None:
            out = self.gate(x, out)  # (B, H, T, Dh), each head's output gated (model.attn_gate)
        out = out.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, H·Dh)
        return self.o_proj(out)
