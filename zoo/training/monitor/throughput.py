"""`Throughput`: the tokens per second a run logs as it trains, and the totals of its session."""

from __future__ import annotations

import time

import lightning as L


class Throughput(L.Callback):
    """Logs `tokens_per_s` (input tokens of all ranks) over the steps since the last log, and
    totals the training time and tokens of this session (validation time excluded), so a
    resumed run reports its own rate."""

    def __init__(self) -> None:
        self._start: float | None = None
        self._tokens_at_start = 0
        self.train_seconds = 0.0
        self.tokens = 0

    def _close_window(self, pl_module) -> tuple[float, int]:
        assert self._start is not None  # called with a window open
        seconds = time.perf_counter() - self._start
        tokens = int(pl_module.tokens_seen) - self._tokens_at_start
        self.train_seconds += seconds
        self.tokens += tokens
        self._start = None
        return seconds, tokens

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._start is None:
            self._start = time.perf_counter()
            self._tokens_at_start = int(pl_module.tokens_seen)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self._start is not None and time.perf_counter() - self._start >= 1.0:
            seconds, tokens = self._close_window(pl_module)
            pl_module.log("tokens_per_s", tokens / seconds, prog_bar=True)
            self.on_train_batch_start(trainer, pl_module, batch, batch_idx)  # data loading counts

    def on_validation_start(self, trainer, pl_module):
        if self._start is not None:
            self._close_window(pl_module)

    def on_train_end(self, trainer, pl_module):
        if self._start is not None:
            self._close_window(pl_module)
