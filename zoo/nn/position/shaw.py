"""Relative position representations of Shaw et al. 2018 ("Self-Attention with Relative
Position Representations"): learned key and value vectors a^K, a^V for every offset clipped to
[-clip, clip], shared across heads, one pair of tables per layer:

    e_ij = q_i · (k_j + a^K_ij) / sqrt(Dh),   z_i = Σ_j α_ij (v_j + a^V_ij).

The key term is an additive score bias; the value term needs the attention weights, so this
scheme uses attention's explicit softmax path."""

from __future__ import annotations

import math

import torch
from torch import nn

from zoo.config.facts.positions import PositionKind
from zoo.nn.position.base import PositionScheme, relative_offsets


class ShawPositions(PositionScheme):
    kind = PositionKind.shaw
    shared_across_layers = False
    needs_attention_weights = True

    def __init__(self, *, head_dim: int, clip: int = 16, **_: object) -> None:
        super().__init__()
        self.clip = clip
        self.keys = nn.Embedding(2 * clip + 1, head_dim)  # a^K, (2·clip+1, Dh)
        self.values = nn.Embedding(2 * clip + 1, head_dim)  # a^V, (2·clip+1, Dh)

    def _index(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        offsets = relative_offsets(q_positions, k_positions)  # (B, T, S)
        return offsets.clamp(-self.clip, self.clip) + self.clip

    def attend(self, q, k, q_positions, k_positions):
        B, H, T, Dh = q.shape
        index = self._index(q_positions, k_positions)  # (B, T, S)
        S = index.shape[-1]
        per_offset = q @ self.keys.weight.to(q.dtype).T  # (B, H, T, 2·clip+1)
        bias = per_offset.gather(-1, index[:, None].expand(B, H, T, S))  # (B, H, T, S)
        return q, k, bias / math.sqrt(Dh)

    def value_term(self, weights, q_positions, k_positions):
        B, H, T, S = weights.shape
        index = self._index(q_positions, k_positions)[:, None].expand(B, H, T, S)  # (B, H, T, S)
        per_offset = weights.new_zeros(B, H, T, 2 * self.clip + 1)
        per_offset.scatter_add_(-1, index, weights)  # (B, H, T, 2·clip+1): weight per offset
        return per_offset @ self.values.weight.to(weights.dtype)  # (B, H, T, Dh)
