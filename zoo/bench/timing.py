"""Interleaved rounds: every case runs once per round, in the same order, so the noise of a
shared machine (other jobs, frequency changes) hits all of them alike; medians over rounds."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

import torch

K = TypeVar("K", bound=Hashable)  # what names a case: a row's name, (name, batch), a matrix size


def interleaved(cases: Mapping[K, Callable[[], float]], *, rounds: int, warmup: int = 1) -> dict[K, list[float]]:
    """Run each case `warmup` times, then `rounds` rounds of every case in turn. A case returns
    the seconds per unit of work it measured (see `timed`); the result is that list per case."""
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    seconds: dict[K, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            seconds[name].append(fn())
    return seconds


def timed(fn: Callable[[], object], units: int, device: torch.device) -> float:
    """Seconds per unit of one call of fn (which does `units` units of work)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) / units


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float]) -> float:
    """(max - min) / median of the rounds: how noisy they were."""
    m = statistics.median(values)
    return (max(values) - min(values)) / m if m else 0.0


def machine(device: torch.device) -> str:
    """What a figure was measured on: the GPU's name, or the CPU's threads and processor."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU, {torch.get_num_threads()} threads ({platform.processor() or platform.machine()})"
