"""The device's measured memory bandwidth: the limit of batch-1 decoding, which reads every
weight once per new token (gpt-fast's yardstick: tokens/s × the weights' bytes against the
bandwidth), measured in the same run as the model, not a datasheet."""

from __future__ import annotations

from functools import partial

import torch

from zoo.bench.timing import interleaved, median, timed


def copy_bytes_per_s(device: torch.device, *, mib: int | None = None, rounds: int = 5) -> float:
    """Median bytes/s moved by copying one buffer into another (each byte read once and written
    once: 2 × its size a copy). The buffer is far larger than any cache: 1 GiB on a GPU, 256 MiB
    on a CPU (`mib` to change it)."""
    size = (mib or (1024 if device.type == "cuda" else 256)) * 2**20
    src = torch.empty(size, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    seconds = interleaved({"copy": partial(timed, partial(dst.copy_, src), 1, device)}, rounds=rounds, warmup=1)
    return 2 * size / median(seconds["copy"])


def weight_bytes(model: torch.nn.Module, bf16: bool) -> int:
    """The bytes of a model's distinct weights at the precision a decoding step needs to read
    them in: 2 a weight in a bf16 variant (what bf16 weights hold, whatever the model stores),
    else their own element size. Tied weights count once (`parameters()` yields them once)."""
    return sum(p.numel() * (2 if bf16 and p.is_floating_point() else p.element_size()) for p in model.parameters())
