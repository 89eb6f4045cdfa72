"""Fixed sinusoidal absolute positions (Vaswani et al. 2017, §3.5):
PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)),
where i is the index of the (sin, cos) pair. No parameters; computed for any position."""

from __future__ import annotations

import torch

from zoo.config.facts.positions import PositionKind
from zoo.nn.position.base import PositionScheme


def sinusoidal_table(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """positions (...,) -> (..., dim) with sin in even and cos in odd dimensions."""
    pair = torch.arange(dim // 2, device=positions.device, dtype=torch.float32)  # (D/2,)
    inv_freq = base ** (-2.0 * pair / dim)  # (D/2,)
    angles = positions.float()[..., None] * inv_freq  # (..., D/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (..., D/2, 2)
    return table.flatten(-2)  # (..., D)


class SinusoidalPositions(PositionScheme):
    """Adds the sinusoid table to the token embeddings."""

    kind = PositionKind.sinusoidal

    def __init__(self, *, d_model: int, **_: object) -> None:
        super().__init__()
        self.d_model = d_model

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x + sinusoidal_table(positions, self.d_model).to(x.dtype)  # (B, T, D)
