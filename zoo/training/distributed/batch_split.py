"""The global batch, split over the devices the Trainer resolved."""

from __future__ import annotations

from zoo.config.errors import ConfigError
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.task import NonFinitePolicy
from zoo.data import per_device_batch


def split_batch(spec: ZooConfig, trainer) -> int:
    """The per-device batch; sets the trainer's gradient accumulation (the rest of
    data.global_batch_size)."""
    # the per-device batch and accumulation derive from the world size the Trainer resolved
    device_batch, accumulation = per_device_batch(
        spec.data.global_batch_size, trainer.world_size, spec.data.max_device_batch_size
    )
    trainer.accumulate_grad_batches = accumulation
    if accumulation > 1 and spec.task.on_nonfinite_loss == NonFinitePolicy.skip:
        raise ConfigError(
            f"task.on_nonfinite_loss=skip needs one micro-batch per optimizer step, but "
            f"data.global_batch_size={spec.data.global_batch_size} over {trainer.world_size} device(s) "
            f"with data.max_device_batch_size={spec.data.max_device_batch_size} accumulates "
            f"{accumulation}; raise data.max_device_batch_size or use on_nonfinite_loss=stop"
        )
    return device_batch
