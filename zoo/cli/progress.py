"""A progress line on stderr for decoding that takes a while: the batch, the steps decoded and
the rate. On a terminal it is rewritten in place; elsewhere (a log file) a line every few
seconds. A last line gives the totals."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(
        self, tool: str, *, batches: int, max_steps: int, stream: TextIO | None = None, every_s: float | None = None
    ) -> None:
        self.tool, self.batches, self.max_steps = tool, batches, max_steps
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = every_s if every_s is not None else (0.5 if self.tty else 10.0)
        self.batch = 0
        self.steps = 0  # in this batch
        self.tokens = 0  # generated in all batches: steps x rows (beams count once)
        self.rows = 0
        self.start = self.last = time.perf_counter()

    def next_batch(self, rows: int) -> None:
        self.batch, self.steps, self.rows = self.batch + 1, 0, rows

    def step(self, _tokens=None) -> None:
        self.steps += 1
        self.tokens += self.rows
        now = time.perf_counter()
        if now - self.last >= self.every_s:
            self.last = now
            self._show(
                f"batch {self.batch}/{self.batches}, step {self.steps}/{self.max_steps}, "
                f"{self.tokens / (now - self.start):,.1f} tokens/s"
            )

    def end(self) -> None:
        took = time.perf_counter() - self.start
        line = f"{self.tokens:,} tokens in {took:.1f} s ({self.tokens / max(took, 1e-9):,.1f} tokens/s)"
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(f"{self.tool}: {line}\n")
        self.stream.flush()

    def _show(self, line: str) -> None:
        self.stream.write(f"\r\033[K{self.tool}: {line}" if self.tty else f"{self.tool}: {line}\n")
        self.stream.flush()
