"""The iterations that orthogonalise Muon's update: G -> about U V^T (G = U S V^T), by odd quintic
polynomials of G applied `steps` times, each iteration's coefficients from its row in
`zoo.config.facts.muon.NS_METHODS` (Jordan et al. 2024's fixed quintic, or Amsel et al. 2025's
Polar Express), in bfloat16 (torch.optim.Muon's choice) or float32.

The quintic in bfloat16 is torch.optim.Muon's `_zeropower_via_newtonschulz` operation for
operation (the same normalisation, transposition and fused multiply-adds), so optim=muon's
default steps as torch's Muon does, bit for bit."""

from __future__ import annotations

import torch

from zoo.config.facts.muon import NS_METHODS, NsMethod, NsPrecision

EPS = 1e-7  # torch.optim.Muon's: the floor of the Frobenius norm G is divided by
DTYPES = {NsPrecision.bfloat16: torch.bfloat16, NsPrecision.float32: torch.float32}


def orthogonalise(
    update: torch.Tensor, method: NsMethod, steps: int, precision: NsPrecision = NsPrecision.bfloat16
) -> torch.Tensor:
    """`update` (A, B), a whole matrix, orthogonalised by `steps` iterations of `method` in
    `precision`; returned in that precision, shape (A, B). The iteration runs on the wide
    orientation (A <= B), so X X^T is the smaller Gram matrix."""
    row = NS_METHODS[method]
    x = update.to(DTYPES[precision])
    tall = update.size(0) > update.size(1)
    if tall:
        x = x.T  # (B, A)
    if row.safety == 1.0:
        x = x / x.norm().clamp(min=EPS)  # torch.optim.Muon: spectral norm at most 1
    else:
        x = x / (x.norm() * row.safety + EPS)  # Polar Express: a margin for rounding in bfloat16
    for a, b, c in row.coefficients(steps):
        gram = x @ x.T  # (A, A)
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)  # b XX^T + c (XX^T)^2
        x = torch.addmm(x, poly, x, beta=a)  # a X + b XX^T X + c (XX^T)^2 X
    return x.T if tall else x


__all__ = ["DTYPES", "orthogonalise"]
