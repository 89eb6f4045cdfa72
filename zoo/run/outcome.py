"""What one run came to (`RunOutcome`): finished, already finished, requeued, interrupted by a
signal, stopped (it could not go on) or refused (the user's to fix before it could run), with
the summary or the failure record, and the exit status zoo-train gives it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from zoo.config.records.rundir import RunFailure


class Outcome(str, Enum):
    FINISHED = "finished"  # trained to the end: summary.json written
    ALREADY_FINISHED = "already_finished"  # the same run again: nothing changed
    REQUEUED = "requeued"  # SLURM requeued the job: it resumes from last.ckpt
    INTERRUPTED = "interrupted"  # SIGTERM / SIGINT: last.ckpt and failed.json
    STOPPED = "stopped"  # could not go on (non-finite loss, a rank died, storage, memory): failed.json
    REFUSED = "refused"  # a mistake the user fixes (a config, a directory that is not this run's)


@dataclass(frozen=True)
class RunOutcome:
    kind: Outcome
    run_dir: Path
    summary: dict | None = None  # FINISHED, ALREADY_FINISHED: summary.json's content
    requeued: Any = None  # REQUEUED: where the next job resumes (`zoo.training.finish.Requeued`)
    failure: RunFailure | None = None  # INTERRUPTED, STOPPED, REFUSED
    recorded: bool = False  # whether `failure` was written as the run's failed.json
    task: Any = None  # FINISHED: the trained LightningModule
    is_global_zero: bool = True

    @property
    def exit_status(self) -> int:
        """zoo-train's: 0, 128 + the signal, 1 for a run that could not go on, 2 for bad input."""
        if self.kind == Outcome.INTERRUPTED:
            signal = self.failure.signal if self.failure is not None else None
            return 128 + int(signal or 0)
        return {Outcome.STOPPED: 1, Outcome.REFUSED: 2}.get(self.kind, 0)

    @property
    def message(self) -> str:
        return self.failure.error if self.failure is not None else ""
