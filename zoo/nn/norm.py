"""Normalization layers: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019)."""

from __future__ import annotations

import torch
from torch import nn

from zoo.config.schema.model import NormType


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x²) + eps) · γ over the last dimension; no centring, no bias.

    Shapes: x (..., D) -> (..., D).
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x.to(dtype) * self.weight

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def build_norm(kind: NormType, dim: int, eps: float, bias: bool) -> nn.Module:
    """LayerNorm keeps eps inside the square root, as `torch.nn.LayerNorm` does."""
    if kind == NormType.layernorm:
        return nn.LayerNorm(dim, eps=eps, bias=bias)
    if kind == NormType.rmsnorm:
        return RMSNorm(dim, eps=eps)
    raise ValueError(f"unknown norm type {kind!r}")
