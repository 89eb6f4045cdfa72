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
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

from zoo.data.resumable import dataset_length

# a batch carrying this key (True) is run for its collectives only: no metric counts it
FILLER = "zoo_filler"


def is_filler(batch: Any) -> bool:
    return isinstance(batch, dict) and bool(batch.get(FILLER, False))


class EvenBatches:
    """`loader` (in order, over this rank's share), then filler batches up to the number of
    batches rank 0 has. `rank`, `world`: this process's place in the data-parallel group; by
    default read from the process group when the batches are counted or read (a loader made
    before the processes start, as zoo-eval's)."""

    def __init__(self, loader: DataLoader, rank: int | None = None, world: int | None = None) -> None:
        self.loader, self.rank, self.world = loader, rank, world
        self.dataset = loader.dataset

    def _place(self) -> tuple[int, int]:
        if self.rank is not None and self.world is not None:
            return self.rank, self.world
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def _counts(self) -> tuple[int, int]:
        """(rank 0's batches, this rank's): rank 0 reads the most."""
        rank, world = self._place()
        size, batch = dataset_length(self.dataset), self.loader.batch_size
        assert batch is not None  # a loader with a sampler (ValidationShardSampler), not a batch sampler
        return math.ceil(len(range(0, size, world)) / batch), math.ceil(len(range(rank, size, world)) / batch)

    def __len__(self) -> int:
        return self._counts()[0]

    def __iter__(self) -> Iterator[Any]:
        batches, mine = self._counts()
        yield from self.loader
        for _ in range(batches - mine):
            batch = self.loader.collate_fn([self.loader.dataset[0]])
            batch[FILLER] = True
            yield batch
