"""One run from a composed config to a typed outcome, for zoo-train and for Python alike:
take the run directory's lock (unless this process holds it), train (`zoo.training.run.train`
validates the config and the machine and resolves the resume, once), turn what ended the run
into a `RunOutcome` and write its record (summary.json by the run itself; failed.json, one
`RunFailure`, here, from rank 0), and give the lock back."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Callable, Optional

from zoo.config.errors import ZooError
from zoo.config.rundir import RunFailure
from zoo.run.failures import known_failure
from zoo.run.lock import ForeignRunDir, RunDirBusy, acquire, owner_of, release
from zoo.run.outcome import Outcome, RunOutcome
from zoo.run.rank import launch_rank
from zoo.training.interrupt import last_words
from zoo.training.resume_check import ResumeMismatch
from zoo.training.run import TrainingInterrupted, TrainingStopped, train as run_training

log = logging.getLogger("zoo")


def train(cfg, run_dir: str | os.PathLike, *, lock: bool = True,
          resume_command: Optional[Callable[[], str]] = None,
          on_stuck: Optional[Callable[[RunOutcome], None]] = None) -> RunOutcome:
    """Train `cfg` (a config composed by `zoo.compose`) in `run_dir`.

    `lock`: take the directory's lock for the run (a live owner, or a directory that holds
    files but no zoo run, is REFUSED); zoo-train takes it before Hydra writes and passes False.
    `resume_command`: the command that resumes the run, recorded in failed.json when a signal
    stops it. `on_stuck`: told the outcome when a stop was not answered and the process is
    about to end from the watchdog (its records are written first).

    A bug (an exception that is not the user's to fix) is recorded in failed.json and raised."""
    run_dir = Path(run_dir)
    held = False
    if lock and launch_rank() == 0 and not _holds(run_dir):
        try:
            acquire(run_dir)
        except (RunDirBusy, ForeignRunDir) as exc:  # someone else's directory: nothing is written
            return RunOutcome(Outcome.REFUSED, run_dir, failure=RunFailure(error=str(exc)))
        held = True

    def stuck(exc) -> None:  # the watchdog's last words: the process ends without unwinding
        outcome = _interrupted(run_dir, exc, resume_command)
        if on_stuck is not None:
            on_stuck(outcome)
        release(run_dir)  # only when this process holds it

    last_words(stuck)
    try:
        result = run_training(cfg, run_dir)
    except ResumeMismatch as exc:  # the directory holds another run: its record stays as it is
        return RunOutcome(Outcome.REFUSED, run_dir, failure=RunFailure(error=str(exc)))
    except TrainingStopped as exc:  # a ZooError that ends a started run
        return _failed(Outcome.STOPPED, run_dir, str(exc))
    except ZooError as exc:  # the user's to fix
        return _failed(Outcome.REFUSED, run_dir, str(exc))
    except TrainingInterrupted as exc:  # SIGTERM / SIGINT: last.ckpt saved
        return _interrupted(run_dir, exc, resume_command)
    except Exception as exc:
        known = known_failure(exc, run_dir)
        outcome = _failed(Outcome.STOPPED, run_dir, known or f"{type(exc).__name__}: {exc}")
        if known is None:
            raise
        return outcome
    finally:
        last_words(None)
        if held:
            release(run_dir)
    summary = result.summary
    if result.already_finished:
        kind = Outcome.ALREADY_FINISHED
    elif summary.get("status") == "requeued":
        kind = Outcome.REQUEUED
    else:
        kind = Outcome.FINISHED
    return RunOutcome(kind, run_dir, summary=summary, task=result.task, is_global_zero=result.is_global_zero)


def _holds(run_dir: Path) -> bool:
    owner = owner_of(run_dir) or {}
    return owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname()


def _record(run_dir: Path, failure: RunFailure) -> bool:
    """failed.json, from rank 0; a disk that cannot take it is said on one line, not raised."""
    if launch_rank() != 0:
        return False
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        failure.write(run_dir)
        return True
    except OSError as exc:  # a full disk or a read-only directory: the run's message still goes out
        log.error("could not write %s (%s)", run_dir / "failed.json", exc.strerror)
        return False


def _failed(kind: Outcome, run_dir: Path, message: str) -> RunOutcome:
    failure = RunFailure(error=message)
    return RunOutcome(kind, run_dir, failure=failure, recorded=_record(run_dir, failure))


def _interrupted(run_dir: Path, exc, resume_command: Optional[Callable[[], str]]) -> RunOutcome:
    resume = resume_command() if resume_command is not None else None
    failure = RunFailure(error=str(exc), signal=exc.signum, step=exc.step, resume=resume)
    return RunOutcome(Outcome.INTERRUPTED, run_dir, failure=failure, recorded=_record(run_dir, failure))
