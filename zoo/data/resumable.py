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

from collections.abc import Iterator, Sized
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def dataset_length(dataset: Dataset) -> int:
    """The examples of a map-style dataset: every dataset a sampler deals out has a length."""
    if not isinstance(dataset, Sized):
        raise TypeError(f"a sampler needs a dataset with a length, not {type(dataset).__name__}")
    return len(dataset)


class EpochShardSampler(DistributedSampler):
    """Seeded per-epoch shuffle, interleaved shards, and a start offset (in indices of this
    rank) for a resumed epoch."""

    def __init__(
        self,
        dataset,
        *,
        num_replicas: int = 1,
        rank: int = 0,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
    ) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
        self.start = 0

    def __iter__(self) -> Iterator[int]:
        if not self.drop_last:  # padded shards: DistributedSampler's own list
            return iter(list(super().__iter__())[self.start :])
        # DistributedSampler's order (the same permutation, dealt out the same way), kept as one
        # int64 tensor and handed out in chunks: a Python list of every index would cost ~36
        # bytes per window of the corpus, 8 here
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(dataset_length(self.dataset), generator=g)
        else:
            order = torch.arange(dataset_length(self.dataset))
        mine = order[: self.total_size][self.rank : self.total_size : self.num_replicas][self.start :]
        return _chunks(mine)

    def __len__(self) -> int:
        return self.num_samples - self.start


def _chunks(indices: torch.Tensor, size: int = 1 << 16) -> Iterator[int]:
    for at in range(0, len(indices), size):
        yield from indices[at : at + size].tolist()


class ResumableLoader(DataLoader):
    """A DataLoader over an `EpochShardSampler` whose position within the epoch is part of
    the checkpoint: `state_dict() -> {"epoch": e, "batches": n}`.

    A collate function with a `set_epoch(epoch)` method is told the epoch before each pass,
    so randomness it draws (e.g. BERT masking) depends on the epoch, not on how many batches
    a process has collated since it started."""

    sampler: EpochShardSampler  # (DataLoader's attributes, as this loader has them)
    batch_size: int  # a loader with a sampler has one (never a batch sampler)

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
        sampler = self.sampler
        skip = 0
        if self._resume is not None and self._resume["epoch"] == sampler.epoch:
            skip = self._resume["batches"]
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
        """The epoch and how far into it: `examples` of the whole job (all ranks), so a run
        may resume on another number of ranks; `batches` of this rank, for reading."""
        replicas = self.sampler.num_replicas
        return {
            "epoch": int(self.sampler.epoch),
            "batches": int(self._epoch_batches),
            "examples": int(self._epoch_batches * self.batch_size * replicas),
        }

    def load_state_dict(self, state: dict) -> None:
        """Lightning calls this before it creates the resumed epoch's iterator and before it
        sets the samplers' epoch, so the sampler is put in the saved epoch here; a finished
        epoch resumes at the start of the next one."""
        per_batch = self.batch_size * self.sampler.num_replicas  # examples of all ranks per batch
        examples = int(state.get("examples", int(state["batches"]) * per_batch))
        epoch, batches = int(state["epoch"]), examples // per_batch
        if batches >= len(self):
            epoch, batches = epoch + 1, 0
        self.sampler.set_epoch(epoch)
        self._resume = {"epoch": epoch, "batches": batches}


class ValidationShardSampler(DistributedSampler):
    """Evaluation order, split over the ranks of whatever process group exists when iterated:
    rank r of W reads examples r, r+W, ... and no example is read twice. (Lightning's own
    DistributedSampler pads the shards to equal length by repeating examples, which would count
    them twice in the metrics, differently for each number of ranks.)"""

    def __init__(self, dataset) -> None:
        super().__init__(dataset, num_replicas=1, rank=0, shuffle=False, drop_last=False)

    def _shard(self) -> tuple[int, int]:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def __iter__(self) -> Iterator[int]:
        rank, world = self._shard()
        return iter(range(rank, dataset_length(self.dataset), world))

    def __len__(self) -> int:
        rank, world = self._shard()
        return len(range(rank, dataset_length(self.dataset), world))


def fixed_generator(seed: int) -> torch.Generator:
    """A generator for a loader that must not draw from the global RNG (creating a DataLoader
    iterator otherwise draws a base seed from it, which would shift dropout masks between an
    interrupted and an uninterrupted run)."""
    return torch.Generator().manual_seed(seed)
