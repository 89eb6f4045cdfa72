"""Callbacks of a zoo run: throughput on the progress bar, and the run summary."""

from __future__ import annotations

import time

import lightning as L


class Throughput(L.Callback):
    """Logs `tokens_per_s` (all ranks, input tokens) over the steps since the last log."""

    def __init__(self) -> None:
        self._start = None
        self._tokens = 0
        self.train_seconds = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._start is None:
            self._start = time.perf_counter()
            self._tokens = int(pl_module.tokens_seen)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.perf_counter()
        elapsed = now - self._start
        if elapsed >= 1.0:
            tokens = int(pl_module.tokens_seen) - self._tokens
            pl_module.log("tokens_per_s", tokens / elapsed, prog_bar=True)
            self.train_seconds += elapsed
            self._start, self._tokens = now, int(pl_module.tokens_seen)

    def on_validation_start(self, trainer, pl_module):
        if self._start is not None:  # validation time does not count as training time
            self.train_seconds += time.perf_counter() - self._start
            self._start = None

    def on_train_end(self, trainer, pl_module):
        self.on_validation_start(trainer, pl_module)
