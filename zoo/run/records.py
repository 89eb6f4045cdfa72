"""The run's failure record as the lifecycle writes it: failed.json (one `RunFailure`), from
rank 0 only; a disk that cannot take it is said on one line, never raised over the run's own
message. summary.json is written by the run itself (`zoo.training.finish`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from zoo.config.records.rundir import RunDir, RunFailure
from zoo.run.outcome import Outcome, RunOutcome
from zoo.run.rank import launch_rank

log = logging.getLogger("zoo")

ResumeCommand = Callable[[], str] | None


def record_failure(run_dir: Path, failure: RunFailure) -> bool:
    """Write `failure` as run_dir's failed.json (rank 0); whether it was written."""
    if launch_rank() != 0:
        return False
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        failure.write(run_dir)
        return True
    except OSError as exc:  # a full disk or a read-only directory: the run's message still goes out
        log.error("could not write %s (%s)", RunDir(run_dir).failed, exc.strerror)
        return False


def record_interrupted(run_dir: Path, exc, resume_command: ResumeCommand) -> RunOutcome:
    """The outcome of a run a signal stopped (`exc`: a TrainingInterrupted), its failed.json
    written with the signal, the step its last.ckpt holds and the command that resumes."""
    resume = resume_command() if resume_command is not None else None
    failure = RunFailure(error=str(exc), signal=exc.signum, step=exc.step, resume=resume)
    return RunOutcome(Outcome.INTERRUPTED, run_dir, failure=failure, recorded=record_failure(run_dir, failure))
