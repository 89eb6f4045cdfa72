"""The device's measured matrix-multiply throughput: the denominator of model FLOPs utilisation
(Chowdhery et al. 2022, appendix B), measured in the same run as the model, not a datasheet."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from zoo.bench.timing import interleaved, median, timed


def matmul_flops_per_s(
    dtype: torch.dtype,
    device: torch.device,
    *,
    sizes=(256, 512, 1024, 2048),
    rounds: int = 5,
    enough_seconds: float = 0.05,
) -> float:
    """Best over `sizes` of the median FLOP/s of an (n, n) @ (n, n) product (2·n³ FLOPs).

    Sizes are tried from the smallest, and larger ones are left out once a product takes
    `enough_seconds`: by then the device runs at its peak, and a dtype the CPU only emulates
    (bfloat16 without native support: a few GFLOP/s) would otherwise take minutes at n = 2048."""
    kept: list[int] = []
    cases: dict[int, Callable[[], float]] = {}
    for n in sizes:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        kept.append(n)

        def run(a=a, b=b):
            for _ in range(3):
                a @ b

        cases[n] = partial(timed, run, 3, device)
        if timed(partial(torch.matmul, a, b), 1, device) > enough_seconds:
            break
    seconds = interleaved(cases, rounds=rounds, warmup=1)
    return max(2 * n**3 / median(seconds[n]) for n in kept)
