"""Per-device batch size and gradient accumulation from `data.global_batch_size`."""

from __future__ import annotations

from zoo.config.errors import ConfigError


def per_device_batch(global_batch_size: int, world_size: int, max_per_device: int | None = None) -> tuple[int, int]:
    """(per-device batch, accumulation steps) with
    per-device batch * accumulation * world_size == global_batch_size.

    Accumulation is the smallest number of micro-batches that keeps the per-device batch at or
    below `max_per_device` (no limit when None). Raises ConfigError when no exact split
    exists."""
    if world_size < 1:
        raise ConfigError(f"world size must be >= 1, got {world_size}")
    if global_batch_size < 1:
        raise ConfigError(f"data.global_batch_size must be >= 1, got {global_batch_size}")
    if global_batch_size % world_size:
        raise ConfigError(
            f"data.global_batch_size ({global_batch_size}) must be divisible by the number of devices ({world_size})"
        )
    per_device = global_batch_size // world_size
    if max_per_device is None or per_device <= max_per_device:
        return per_device, 1
    if max_per_device < 1:
        raise ConfigError(f"data.max_device_batch_size must be >= 1, got {max_per_device}")
    for accumulation in range(2, per_device + 1):
        if per_device % accumulation == 0 and per_device // accumulation <= max_per_device:
            return per_device // accumulation, accumulation
    raise ConfigError(  # unreachable: accumulation = per_device gives batch 1
        f"no split of {per_device} examples per device into micro-batches of at most {max_per_device}"
    )
