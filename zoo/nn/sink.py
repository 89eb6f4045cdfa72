"""An attention sink: a logit s_h per query head that joins head h's softmax denominator,
p_ij = exp(a_ij) / (exp(s_h) + Σ_j exp(a_ij)) (`model.attn_sink`: learned, as gpt-oss's `sinks`;
off_by_one, s_h = 0, Miller 2023). Rows: `zoo.config.facts.heads.SINK_FACTS`.

`with_sink` makes it exact on every attention path, SDPA's fused kernels included: one more key
column, a zero key and a zero value, whose score gets the additive bias s_h (q·0 = 0, so the
score is s_h; the zero value adds nothing to the output). The caller drops the column from the
weights it returns. Shapes: q (B, H, T, Dh); k, v (B, Hkv, S, Dh)."""

from __future__ import annotations

import torch
from torch import nn

from zoo.config.facts.heads import SINK_FACTS, AttnSink


class AttentionSink(nn.Module):
    """The sink logits of one attention: `logits` (H,) learned, or zeros (off_by_one)."""

    starts = SINK_FACTS[AttnSink.learned].starts  # how `logits` starts: the learned row's

    def __init__(self, kind: AttnSink, n_heads: int) -> None:
        super().__init__()
        if kind == AttnSink.none:
            raise ValueError("AttentionSink needs a sink kind, not none")
        self.kind, self.n_heads = kind, n_heads
        self.logits = nn.Parameter(torch.empty(n_heads)) if kind == AttnSink.learned else None  # (H,)

    def forward(self, like: torch.Tensor) -> torch.Tensor:
        """The H sink logits, in `like`'s dtype and device."""
        if self.logits is None:
            return like.new_zeros(self.n_heads)  # (H,)
        return self.logits.to(like.dtype)  # (H,)

    def extra_repr(self) -> str:
        return f"kind={self.kind.value}, heads={self.n_heads}"


def with_sink(
    sink: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None,
    bias: torch.Tensor | None,
    T: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """k, v (B, Hkv, S, Dh), a boolean mask (B or 1, 1, T, S) or None, an additive bias
    broadcastable to (B, H, T, S) or None, and the sink logits (H,) -> the same with one more key
    column: a zero key and value, always seen, its bias the head's sink logit."""
    B, Hkv, S, Dh = k.shape
    H = sink.shape[0]
    zero = k.new_zeros(B, Hkv, 1, Dh)
    k = torch.cat([k, zero], dim=2)  # (B, Hkv, S + 1, Dh)
    v = torch.cat([v, zero.to(v.dtype)], dim=2)  # (B, Hkv, S + 1, Dh)
    if bias is None:
        bias = sink.new_zeros(1, H, T, S)  # (1, H, T, S)
    else:
        bias = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))  # (B or 1, H or 1, T or 1, S or 1)
        bias = bias.expand(bias.shape[0], H, T, S)  # (B or 1, H, T, S)
    column = sink.to(bias.dtype).view(1, H, 1, 1).expand(bias.shape[0], H, T, 1)  # (B or 1, H, T, 1)
    bias = torch.cat([bias, column], dim=-1)  # (B or 1, H, T, S + 1)
    if mask is not None:
        seen = mask.new_ones(*mask.shape[:-1], 1)  # (B or 1, 1, T, 1)
        mask = torch.cat([mask, seen], dim=-1)  # (B or 1, 1, T, S + 1)
    return k, v, mask, bias
