"""Rotary position embeddings (Su et al. 2021, RoFormer): q and k are rotated by an angle
proportional to their position, so q·k depends only on the offset between them. Uses the
rotate-half pairing (dimension i with i + Dh/2). `rotary_fraction` < 1 rotates only the first
dimensions of each head and passes the rest (GPT-NeoX). `scale` > 1 stretches a trained context
by the rule `scaling` (`zoo.nn.position.extension`): linear position interpolation (Chen et al.
2023) divides the positions by it; NTK-aware and YaRN change the frequencies, YaRN also
multiplies cos and sin; dynamic NTK takes the frequencies of each forward's length, so its
keys are cached unrotated and rotated again at every step."""

from __future__ import annotations

import torch

from zoo.config.facts.positions import PositionKind
from zoo.config.facts.rope import SCALING_FACTS, RopeScaling
from zoo.nn.position.base import PositionScheme
from zoo.nn.position.extension import dynamic_inv_freq, scaled_inv_freq


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., Dh) -> (..., Dh): [x1, x2] -> [-x2, x1]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryPositions(PositionScheme):
    kind = PositionKind.rope
    keys_transformed_alone = True  # a cache holds rotated keys

    inv_freq: torch.Tensor  # (R/2,) a buffer, R = the rotated dimensions of a head

    def __init__(
        self,
        *,
        head_dim: int,
        theta: float = 10000.0,
        scale: float = 1.0,
        scaling: RopeScaling | str = RopeScaling.linear,
        max_seq_len: int = 256,
        original_max_seq_len: int | None = None,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        attention_factor: float | None = None,
        rotary_fraction: float = 1.0,
        **_: object,
    ):
        super().__init__()
        scaling = RopeScaling(scaling)
        self.rotary_dims = int(head_dim * rotary_fraction)  # R: the first R dimensions turn
        self.scale = scale if scaling == RopeScaling.linear else 1.0  # positions divided by it
        original = original_max_seq_len if original_max_seq_len is not None else max_seq_len
        # dynamic: (theta, factor, original) of the frequencies each forward computes; a cache
        # then holds unrotated keys (the instance's flag overrides the class's)
        self.dynamic = (theta, scale, original) if SCALING_FACTS[scaling].per_forward and scale != 1.0 else None
        self.keys_transformed_alone = self.dynamic is None
        inv_freq, self.multiplier = scaled_inv_freq(
            scaling,
            theta=theta,
            dims=self.rotary_dims,
            factor=scale,
            original=original,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            attention_factor=attention_factor,
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (R/2,)

    def frequencies(self, q_positions: torch.Tensor) -> torch.Tensor:
        """The inverse frequencies (R/2,) of a forward whose queries are at `q_positions` (B, T):
        the buffer, or under the dynamic rule those of the length the queries reach."""
        if self.dynamic is None:
            return self.inv_freq
        theta, factor, original = self.dynamic
        return dynamic_inv_freq(theta, self.rotary_dims, factor, original, q_positions)

    def angles(
        self, positions: torch.Tensor, dtype: torch.dtype, inv_freq: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (B, T) -> cos, sin (B, 1, T, R), at `inv_freq` (default: `frequencies(positions)`)."""
        inv_freq = self.frequencies(positions) if inv_freq is None else inv_freq
        angles = (positions.float() / self.scale)[..., None] * inv_freq  # (B, T, R/2)
        angles = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, T, R)
        cos, sin = angles.cos(), angles.sin()
        if self.multiplier != 1.0:  # YaRN's attention temperature, on both q and k
            cos, sin = cos * self.multiplier, sin * self.multiplier
        return cos.to(dtype), sin.to(dtype)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor, cos_sin=None) -> torch.Tensor:
        """x (B, H, T, Dh), positions (B, T) -> rotated x (B, H, T, Dh)."""
        cos, sin = cos_sin if cos_sin is not None else self.angles(positions, x.dtype)
        R = self.rotary_dims
        if R == x.shape[-1]:
            return x * cos + rotate_half(x) * sin
        turned, kept = x[..., :R], x[..., R:]  # (B, H, T, R), (B, H, T, Dh - R)
        return torch.cat((turned * cos + rotate_half(turned) * sin, kept), dim=-1)  # (B, H, T, Dh)

    def attend(self, q, k, q_positions, k_positions):
        if k_positions is q_positions and q.dtype == k.dtype:  # self-attention without a cache
            cos_sin = self.angles(q_positions, q.dtype)
            return self.rotate(q, q_positions, cos_sin), self.rotate(k, k_positions, cos_sin), None
        if self.dynamic is not None:  # the keys turn at the queries' frequencies
            inv_freq = self.frequencies(q_positions)
            q_turn, k_turn = self.angles(q_positions, q.dtype, inv_freq), self.angles(k_positions, k.dtype, inv_freq)
            return self.rotate(q, q_positions, q_turn), self.rotate(k, k_positions, k_turn), None
        return self.rotate(q, q_positions), self.rotate(k, k_positions), None
