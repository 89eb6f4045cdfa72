"""The distributed strategies `trainer.strategy` names, as zoo builds them.

- `ddp`: Lightning's DDP, with the DistributedDataParallel wrapper built on the stream the
  forward and backward run on. (Lightning builds it on a side stream; PyTorch then warns on
  every backward that the gradient accumulators' stream does not match.)
- `fsdp`: fully sharded data parallelism with FSDP2 (`zoo.training.distributed.fsdp`), over every rank.
- `hsdp`: hybrid sharding, FSDP2 on a 2-D mesh: shard within groups of ranks (a node),
  replicate across them (`trainer.replicate` groups; default trainer.num_nodes).

Any other value (`auto`, `ddp_spawn`, a strategy object) goes to Lightning unchanged."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.strategies import DDPStrategy
from torch.nn.parallel import DistributedDataParallel

from zoo.config.schema.trainer import HYBRID_STRATEGY, SHARDED_STRATEGY, is_sharded_name
from zoo.training.distributed.fsdp import ShardedDataParallel

DDP = "ddp"


class DataParallel(DDPStrategy):
    def _setup_model(self, model) -> DistributedDataParallel:
        return DistributedDataParallel(module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs)


def build_strategy(value: Any, replicate: int | None = None) -> Any:
    """`trainer.strategy` (and zoo's `trainer.replicate`, for hsdp) -> what Lightning's Trainer
    takes."""
    if value == DDP:
        return DataParallel()
    if value == SHARDED_STRATEGY:
        return ShardedDataParallel()
    if value == HYBRID_STRATEGY:
        return ShardedDataParallel(replicate=replicate, hybrid=True)
    return value


def is_sharded(value: Any) -> bool:
    return is_sharded_name(value) or isinstance(value, ShardedDataParallel)
