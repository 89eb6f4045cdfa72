"""Validation batches split over the ranks, the same number on every rank.

Under FSDP a forward is a collective (each layer's parameters are gathered from every rank), so
every rank must run as many validation forwards as the others; under DDP a rank with no example
at all would stop Lightning. Each rank reads its own share of the examples
(`ValidationShardSampler`: rank r of W reads r, r+W, ...), and a rank whose share makes one batch
fewer than rank 0's (or none) runs a forward on a filler batch (the first example, marked
`FILLER`), which the task runs and counts nowhere. The metrics, reduced over the ranks, are
then those of the examples read once each."""

from __future__ import annotations

import math
from typing import Any, Iterator

from torch.utils.data import DataLoader

# a batch carrying this key (True) is run for its collectives only: no metric counts it
FILLER = "zoo_filler"


def is_filler(batch: Any) -> bool:
    return isinstance(batch, dict) and bool(batch.get(FILLER, False))


class EvenBatches:
    """`loader` (in order, over this rank's share), then filler batches up to the number of
    batches rank 0 has. `rank`, `world`: this process's place in the data-parallel group."""

    def __init__(self, loader: DataLoader, rank: int, world: int) -> None:
        self.loader, self.rank, self.world = loader, rank, world
        size = len(loader.dataset)
        self.batches = math.ceil(len(range(0, size, world)) / loader.batch_size)  # rank 0 reads the most
        self.mine = math.ceil(len(range(rank, size, world)) / loader.batch_size)
        self.dataset = loader.dataset

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Iterator[Any]:
        yield from self.loader
        for _ in range(self.batches - self.mine):
            batch = self.loader.collate_fn([self.loader.dataset[0]])
            batch[FILLER] = True
            yield batch
