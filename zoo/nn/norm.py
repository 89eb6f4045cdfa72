"""Normalization layers: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019).

`NORMS` is keyed by `NormType` and holds one builder per row of
`zoo.config.facts.norms.NORM_FACTS`; `tests/config/facts/test_norm_table.py` keeps the two in
step (the parameters a row says one norm holds are the built module's)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.facts.norms import NORM_FACTS, NormType


class RMSNorm(nn.RMSNorm):
    """y = x / sqrt(mean(x²) + eps) · γ over the last dimension; no centring, no bias.

    `torch.nn.RMSNorm` (its `weight` is γ, so checkpoints load either way) where it computes
    the same: a float32 input with float32 γ runs torch's kernel, equal to the path below bit
    for bit (`tests/config/facts/test_norm_table.py`). Any other dtype keeps zoo's own
    computation, which torch's does not reproduce: x is normalized in float32, cast back to its
    dtype, then multiplied by γ (Hugging Face Llama's and T5's order, which the parity tests
    load). torch's kernel multiplies by γ before it rounds: in bfloat16 about a quarter of its
    outputs differ by one unit in the last place (random inputs, 2.13 on a CPU), and with
    bfloat16 x and float32 γ (as under autocast) it returns bfloat16 where this returns float32.

    Shapes: x (..., D) -> (..., D).
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__(dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)
        dtype = x.dtype
        x = x.float()
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps  # torch's rule for eps=None
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return x.to(dtype) * self.weight

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def layernorm(dim: int, eps: float, bias: bool) -> nn.Module:
    """`torch.nn.LayerNorm`, eps inside the square root; β with model.bias."""
    return nn.LayerNorm(dim, eps=eps, bias=bias)


def rmsnorm(dim: int, eps: float, bias: bool) -> nn.Module:
    """RMSNorm has no bias, whatever model.bias says."""
    return RMSNorm(dim, eps=eps)


NORMS: dict[NormType, Callable[[int, float, bool], nn.Module]] = {
    NormType.layernorm: layernorm,
    NormType.rmsnorm: rmsnorm,
}

# the module classes NORMS builds
NORM_MODULES = (nn.LayerNorm, RMSNorm)


def build_norm(kind: NormType, dim: int, eps: float, bias: bool) -> nn.Module:
    """One norm of type `kind` over `dim` (ValueError for a kind with no builder), carrying its
    row's `starts` (how its parameters start: `zoo.models.base.ZooModel.init_rules` reads it)."""
    if kind not in NORMS:
        raise ValueError(f"no norm builder for model.norm_type={kind!r}")
    norm = NORMS[kind](dim, eps, bias)
    object.__setattr__(norm, "starts", NORM_FACTS[kind].starts)  # a plain attribute, not a submodule
    return norm
