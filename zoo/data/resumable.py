"""A training loader that can stop mid-epoch and continue exactly where it stopped.

`EpochShardSampler` is a `DistributedSampler`: each epoch draws one permutation of the dataset
from `seed + epoch` and rank r of W reads positions r, r+W, r+2W, ... of it. So global batch
k is always the same examples, however many ranks share it: with W ranks of B/W examples
each, step k covers positions k·B .. k·B+B-1 of the permutation, as one rank with B does.
(Lightning keeps a `DistributedSampler` as it is instead of wrapping it in its own.)

`ResumableLoader` counts the batches it has handed out in the current epoch; Lightning saves
`state_dict()` in every checkpoint and calls `load_state_dict()` on resume, and the next
epoch iterator skips the batches already trained on, without loading them. The count is
exact because Lightning does not prefetch from a loader that has a length.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader, DistributedSampler


class EpochShardSampler(DistributedSampler):
    """Seeded per-epoch shuffle, interleaved shards, and a start offset (in indices of this
    rank) for a resumed epoch."""

    def __init__(self, dataset, *, num_replicas: int = 1, rank: int = 0, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = True) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        self.start = 0

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())
        return iter(indices[self.start:])

    def __len__(self) -> int:
        return self.num_samples - self.start


class ResumableLoader(DataLoader):
    """A DataLoader over an `EpochShardSampler` whose position within the epoch is part of
    the checkpoint: `state_dict() -> {"epoch": e, "batches": n}`.

    A collate function with a `set_epoch(epoch)` method is told the epoch before each pass,
    so randomness it draws (e.g. BERT masking) depends on the epoch, not on how many batches
    a process has collated since it started."""

    def __init__(self, dataset, *, sampler: EpochShardSampler, **kwargs: Any) -> None:
        if not isinstance(sampler, EpochShardSampler):
            raise TypeError("ResumableLoader needs an EpochShardSampler")
        kwargs.setdefault("drop_last", True)
        super().__init__(dataset, sampler=sampler, **kwargs)
        self._epoch_batches = 0  # batches handed out in the current epoch
        self._resume: dict | None = None

    def __len__(self) -> int:  # batches in a whole epoch, resumed or not
        n = self.sampler.num_samples
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        sampler: EpochShardSampler = self.sampler
        skip = 0
        if self._resume is not None and self._resume["epoch"] == sampler.epoch:
            skip = min(int(self._resume["batches"]), len(self))
        self._resume = None
        sampler.start = skip * self.batch_size
        if hasattr(self.collate_fn, "set_epoch"):
            self.collate_fn.set_epoch(sampler.epoch)
        self._epoch_batches = skip
        return self._count(super().__iter__())

    def _count(self, batches):
        for batch in batches:
            self._epoch_batches += 1
            yield batch

    def state_dict(self) -> dict:
        return {"epoch": int(self.sampler.epoch), "batches": int(self._epoch_batches)}

    def load_state_dict(self, state: dict) -> None:
        self._resume = {"epoch": int(state["epoch"]), "batches": int(state["batches"])}


def fixed_generator(seed: int) -> torch.Generator:
    """A generator for a loader that must not draw from the global RNG (creating a DataLoader
    iterator otherwise draws a base seed from it, which would shift dropout masks between an
    interrupted and an uninterrupted run)."""
    return torch.Generator().manual_seed(seed)
