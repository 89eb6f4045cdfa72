"""The two ways a run ends early with what it saved kept: a stop (e.g. a non-finite loss) and
an interruption by a signal. zoo-train reports both in failed.json."""

from __future__ import annotations

import signal
from pathlib import Path

from zoo.config.errors import ZooError


class TrainingStopped(ZooError, RuntimeError):
    """Training could not go on (e.g. a non-finite loss); what was saved before is kept. The
    user's to fix (a lower learning rate, clipping), reported on one line; zoo-train exits 1."""


class TrainingInterrupted(RuntimeError):
    """SIGTERM / SIGINT stopped the run at `step` after saving `checkpoint`; with `why` (a stop
    at once), `checkpoint` is the last one written before (last.ckpt, else a best-STEP one) and
    `step` the step it holds (None: there is none)."""

    def __init__(self, signum: int, step: int | None, checkpoint: Path, why: str | None = None) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        name = signal.Signals(signum).name
        if why is None:
            message = f"stopped by {name} at step {step}; {checkpoint} holds it"
        elif step is None:
            message = f"stopped by {why}; no checkpoint had been written yet"
        elif checkpoint.name.startswith("best-"):  # a validation saved it before any last.ckpt was due
            message = (
                f"stopped by {why}; {checkpoint} holds step {step}, the last one saved (the best "
                f"validation so far; no last.ckpt had been written yet)"
            )
        else:
            message = f"stopped by {why}; {checkpoint} holds step {step}, the last one saved"
        super().__init__(message)
