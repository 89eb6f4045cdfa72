"""The distributed strategies `trainer.strategy` names, as zoo builds them.

- `ddp`: Lightning's DDP, with the DistributedDataParallel wrapper built on the stream the
  forward and backward run on. (Lightning builds it on a side stream; PyTorch then warns on
  every backward that the gradient accumulators' stream does not match.)
- `fsdp`: fully sharded data parallelism with FSDP2 (`zoo.training.fsdp`).

Any other value (`auto`, `ddp_spawn`, a strategy object) goes to Lightning unchanged."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.strategies import DDPStrategy
from torch.nn.parallel import DistributedDataParallel

from zoo.training.fsdp import STRATEGY_NAME as FSDP, ShardedDataParallel

DDP = "ddp"


class DataParallel(DDPStrategy):
    def _setup_model(self, model) -> DistributedDataParallel:
        return DistributedDataParallel(module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs)


def build_strategy(value: Any) -> Any:
    """`trainer.strategy` -> what Lightning's Trainer takes."""
    if value == DDP:
        return DataParallel()
    if value == FSDP:
        return ShardedDataParallel()
    return value


def is_sharded(value: Any) -> bool:
    return value == FSDP or isinstance(value, ShardedDataParallel)
