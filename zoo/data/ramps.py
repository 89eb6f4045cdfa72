"""Batch-size and sequence-length warmup in the training loader (the ramps' points and checks:
`zoo.config.facts.ramps`).

`RampedLoader` is a `ResumableLoader` whose micro-batch follows `data.batch_warmup`: its
DataLoader reads units of `unit` windows (the greatest common divisor of the ramp's per-rank
micro-batches) and joins as many as the stage's micro-batch needs, so the sampler's order is
untouched: global step k still covers the next b(k) positions of the epoch's permutation,
however many ranks share it (rank r of W reads positions r, r+W, ... as before). The count
of micro-batches handed out since the run began is part of its state, so a run resumed
inside the ramp takes the stage it stopped in, at the example it stopped at.

`cut_rows` is the sequence-length warmup: a causal batch of B windows of T tokens becomes
B·(T/L) rows of L tokens (the same tokens, each predicted once, as before)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from zoo.config.errors import ConfigError
from zoo.config.facts.ramps import Points, value_at
from zoo.data.resumable import EpochShardSampler, ResumableLoader


class RampedLoader(ResumableLoader):
    """A `ResumableLoader` with the per-rank micro-batch `value_at(micro, step)` at optimizer
    step `step = micro-batches handed out // accumulation`. `micro`: `[step, per-rank
    micro-batch]` points (`zoo.config.facts.ramps.micro_batches`)."""

    def __init__(self, dataset, *, sampler: EpochShardSampler, micro: Points, accumulation: int, **kwargs) -> None:
        self.micro, self.accumulation = micro, accumulation
        self.unit = math.gcd(*(size for _, size in micro))
        kwargs["batch_size"] = self.unit
        super().__init__(dataset, sampler=sampler, **kwargs)
        self._micro_total = 0  # micro-batches handed out since the run began
        self._epoch_first = 0  # ... when the current epoch began
        self._examples = 0  # examples of this rank handed out in the current epoch

    def micro_at(self, index: int) -> int:
        """The per-rank micro-batch of the run's `index`-th micro-batch."""
        return value_at(self.micro, index // self.accumulation)

    def __len__(self) -> int:  # micro-batches of the current epoch, from its start
        left, index, n = self.sampler.num_samples, self._epoch_first, 0
        while left >= self.micro_at(index):
            left -= self.micro_at(index)
            index, n = index + 1, n + 1
            if index // self.accumulation > self.micro[-1][0]:  # past the ramp: full micro-batches
                return n + left // self.micro[-1][1]
        return n

    def __iter__(self):
        sampler = self.sampler
        if self._resume is not None and self._resume["epoch"] == sampler.epoch:
            self._micro_total, self._examples = self._resume["micro"], self._resume["examples"]
            self._epoch_batches = self._resume["batches"]
            self._epoch_first = self._micro_total - self._epoch_batches
        else:
            self._epoch_first, self._examples, self._epoch_batches = self._micro_total, 0, 0
        self._resume = None
        sampler.start = self._examples
        if hasattr(self.collate_fn, "set_epoch"):
            self.collate_fn.set_epoch(sampler.epoch)
        return self._joined(torch.utils.data.DataLoader.__iter__(self))

    def _joined(self, units: Iterator[dict]) -> Iterator[dict]:
        """Consecutive units joined into each step's micro-batch; a short tail is dropped."""
        while True:
            need = self.micro_at(self._micro_total) // self.unit
            parts = []
            for unit in units:
                parts.append(unit)
                if len(parts) == need:
                    break
            if len(parts) < need:
                return
            self._micro_total += 1
            self._epoch_batches += 1
            self._examples += need * self.unit
            yield {key: torch.cat([part[key] for part in parts]) for key in parts[0]}

    def state_dict(self) -> dict:
        """The epoch, the micro-batches of this epoch (`batches`) and of the run (`micro`), the
        examples of the epoch over all ranks (`examples`, so a run may resume on another number
        of ranks) and the gradient accumulation the micro-batches count in."""
        return {
            "epoch": int(self.sampler.epoch),
            "batches": int(self._epoch_batches),
            "micro": int(self._micro_total),
            "examples": int(self._examples * self.sampler.num_replicas),
            "accumulation": int(self.accumulation),
        }

    def load_state_dict(self, state: dict) -> None:
        """The saved place; a finished epoch resumes at the start of the next one. A checkpoint
        of a loader without the ramp resumes from its examples, each of its batches counted.
        ConfigError when the saved micro-batches count another gradient accumulation (the
        step each stage starts at could not be told)."""
        epoch = int(state["epoch"])
        saved = int(state.get("accumulation", self.accumulation))
        if saved != self.accumulation:
            raise ConfigError(
                f"data.batch_warmup: the checkpoint counts a gradient accumulation of {saved} micro-batches "
                f"per step; this run has {self.accumulation}: resume with the data.max_device_batch_size "
                "and ranks that wrote it"
            )
        micro = int(state.get("micro", state["batches"]))
        examples = int(state.get("examples", 0)) // self.sampler.num_replicas
        resume = {"epoch": epoch, "batches": int(state["batches"]), "micro": micro, "examples": examples}
        self._micro_total = micro
        if self.sampler.num_samples - examples < self.micro_at(micro):
            resume = {"epoch": epoch + 1, "batches": 0, "micro": micro, "examples": 0}
        self.sampler.set_epoch(resume["epoch"])
        self._resume = resume


def cut_rows(batch: dict, context: int) -> dict:
    """Each (B, T) tensor of a causal batch as (B·T/L, L) rows of L = `context` tokens; the
    rest (none in a causal batch) as it is. Inputs and labels are cut alike, so row j of a
    window predicts labels j·L .. j·L+L-1 of it from inputs j·L .. j·L+L-1, as the whole window
    did but with a shorter context."""
    ids = batch["input_ids"]
    B, T = ids.shape
    if context >= T:
        return batch
    return {
        key: value.reshape(B * (T // context), context) if torch.is_tensor(value) and value.shape == (B, T) else value
        for key, value in batch.items()  # (B·T/L, L)
    }
