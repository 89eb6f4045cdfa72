"""Rotary position embeddings (Su et al. 2021, RoFormer): q and k are rotated by an angle
proportional to their position, so q·k depends only on the offset between them. Uses the
rotate-half pairing (dimension i with i + Dh/2). `scale` > 1 is linear position interpolation
(Chen et al. 2023): positions are divided by it to stretch a trained context."""

from __future__ import annotations

import torch

from zoo.config.facts.positions import PositionKind
from zoo.nn.position.base import PositionScheme


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., Dh) -> (..., Dh): [x1, x2] -> [-x2, x1]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryPositions(PositionScheme):
    kind = PositionKind.rope
    keys_transformed_alone = True  # a cache holds rotated keys

    inv_freq: torch.Tensor  # (Dh/2,) a buffer

    def __init__(self, *, head_dim: int, theta: float = 10000.0, scale: float = 1.0, **_: object):
        super().__init__()
        self.scale = scale
        # 1 / theta^(2i/Dh), computed as Hugging Face's Llama does (theta ** -x in float32 drifts
        # from it by up to 1e-4 in cos/sin at positions in the thousands)
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (Dh/2,)

    def angles(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (B, T) -> cos, sin (B, 1, T, Dh)."""
        angles = (positions.float() / self.scale)[..., None] * self.inv_freq  # (B, T, Dh/2)
        angles = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, T, Dh)
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor, cos_sin=None) -> torch.Tensor:
        """x (B, H, T, Dh), positions (B, T) -> rotated x (B, H, T, Dh)."""
        cos, sin = cos_sin if cos_sin is not None else self.angles(positions, x.dtype)
        return x * cos + rotate_half(x) * sin

    def attend(self, q, k, q_positions, k_positions):
        if k_positions is q_positions and q.dtype == k.dtype:  # self-attention without a cache
            cos_sin = self.angles(q_positions, q.dtype)
            return self.rotate(q, q_positions, cos_sin), self.rotate(k, k_positions, cos_sin), None
        return self.rotate(q, q_positions), self.rotate(k, k_positions), None
