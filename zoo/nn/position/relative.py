"""T5's bucketed relative position bias (Raffel et al. 2020, §2.1): each head learns one scalar
per bucket of the offset k - q; small offsets get a bucket each, larger ones share
logarithmically wider buckets up to `max_distance`. One table per stack, shared by all layers
as in T5; bidirectional in an encoder, past-only in a causal decoder."""

from __future__ import annotations

import math

import torch
from torch import nn

from zoo.config.facts.positions import PositionKind
from zoo.nn.position.base import PositionScheme, relative_offsets


def relative_bucket(offset: torch.Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int) -> torch.Tensor:
    """Bucket index in [0, num_buckets) for each offset = k_position - q_position."""
    distance = -offset  # > 0: the key lies in the past
    bucket = torch.zeros_like(offset)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (distance < 0).long() * num_buckets  # future keys use the upper half
        distance = distance.abs()
    else:
        distance = distance.clamp(min=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, distance, large)


class RelativeBiasPositions(PositionScheme):
    """Bias table[bucket(k - q), h], shape (B, H, T, S)."""

    kind = PositionKind.relative
    bias_from_positions_only = True  # one bias per stack forward, reused by every layer

    def __init__(
        self,
        *,
        n_heads: int,
        causal: bool,
        num_buckets: int = 32,
        max_distance: int = 128,
        **_: object,
    ) -> None:
        super().__init__()
        self.bidirectional = not causal
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.table = nn.Embedding(num_buckets, n_heads)

    def attend(self, q, k, q_positions, k_positions):
        buckets = relative_bucket(
            relative_offsets(q_positions, k_positions),
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # (B, T, S)
        bias = self.table(buckets).permute(0, 3, 1, 2)  # (B, H, T, S)
        return q, k, bias.to(q.dtype)
