"""ALiBi (Press et al. 2022, "Train Short, Test Long"): no embeddings; each head adds
-m_h · |i - j| to its attention scores, with head slopes m_h a geometric sequence."""

from __future__ import annotations

import math

import torch

from zoo.config.facts.positions import PositionKind
from zoo.nn.position.base import PositionScheme, relative_offsets


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The paper's slopes: 2^(-8/n · h) for h = 1..n when n is a power of two; otherwise the
    slopes of the next lower power of two, interleaved with every other slope of twice that."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    if math.log2(n_heads).is_integer():
        slopes = power_of_two(n_heads)
    else:
        lower = 2 ** math.floor(math.log2(n_heads))
        slopes = power_of_two(lower) + power_of_two(2 * lower)[0::2][: n_heads - lower]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBiPositions(PositionScheme):
    """Bias -m_h · |k_pos - q_pos|; under a causal mask only the past is seen, which is the
    paper's form. Shape of the bias: (B, H, T, S)."""

    kind = PositionKind.alibi
    bias_from_positions_only = True  # one bias per stack forward, reused by every layer

    slopes: torch.Tensor  # (H,) a buffer

    def __init__(self, *, n_heads: int, **_: object) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)  # (H,)

    def attend(self, q, k, q_positions, k_positions):
        distance = relative_offsets(q_positions, k_positions).abs()  # (B, T, S)
        bias = -self.slopes[None, :, None, None] * distance[:, None].to(self.slopes.dtype)  # (B, H, T, S)
        return q, k, bias.to(q.dtype)
