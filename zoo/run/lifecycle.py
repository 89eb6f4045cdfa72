"""One run from a composed config to a typed outcome, for zoo-train and for Python alike:
`train` claims the run once (`zoo.run.preflight`: checks, run directory, lock, resume) and `execute`
runs the claimed run, turns what ended it into a `RunOutcome`, writes its failure record (failed.json,
one `RunFailure`, from rank 0; summary.json is the run's own) and gives the lock back.

The run trains on the claim's typed config (`ZooConfig`: `zoo.training.fit.fit_run`); the
composed config goes no further than here, where it is resolved once for the run's records
(config.yaml, the experiment trackers) and read for the message of a finished run asked again,
which names the keys that follow trainer.max_steps in it (`to_train_on`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo.config.errors import ZooError
from zoo.config.records.rundir import RunFailure
from zoo.config.schema.convert import to_plain
from zoo.run.failures import known_failure
from zoo.run.lock import release
from zoo.run.outcome import Outcome, RunOutcome
from zoo.run.preflight import ClaimedRun, RunRefused, claim_run
from zoo.run.records import ResumeCommand, record_failure, record_interrupted
from zoo.training.fit import fit_run
from zoo.training.origin import RunOrigin
from zoo.training.resume.match import COMPARED, MAY_CHANGE, as_override, flatten
from zoo.training.signals.interrupt import last_words
from zoo.training.stops import TrainingInterrupted, TrainingStopped

log = logging.getLogger("zoo")

OnStuck = Callable[[RunOutcome], None] | None


def train(
    cfg,
    run_dir: str | os.PathLike,
    *,
    lock: bool = True,
    resume_command: ResumeCommand = None,
    on_stuck: OnStuck = None,
) -> RunOutcome:
    """Train `cfg` (a config composed by `zoo.compose`) in `run_dir`: `claim_run` it, then `execute`.

    `lock`: take the directory's lock for the run (a live owner, or a directory that holds
    files but no zoo run, is REFUSED with nothing written). A bug (an exception that is not the
    user's to fix) is recorded in failed.json and raised."""
    try:
        claimed = claim_run(cfg, run_dir, lock=lock)
    except RunRefused as exc:
        return refused(Path(run_dir), exc)
    return execute(claimed, resume_command=resume_command, on_stuck=on_stuck)


def refused(run_dir: Path, exc: RunRefused) -> RunOutcome:
    """The outcome of a run that could not be claimed."""
    return RunOutcome(
        Outcome.REFUSED, run_dir, failure=RunFailure(error=str(exc)), recorded=exc.recorded_in is not None
    )


def execute(
    claimed: ClaimedRun,
    *,
    origin: RunOrigin | None = None,
    resume_command: ResumeCommand = None,
    on_stuck: OnStuck = None,
) -> RunOutcome:
    """Run `claimed` and give back its lock (if the claim took it).

    `origin`: the command the run came from (its recipe, overrides, group choices, sweep), which
    its records name; None for a run composed in Python (`RunOrigin()`).

    `resume_command`: the command that resumes the run, recorded in failed.json when a signal
    stops it. `on_stuck`: told the outcome when a stop was not answered and the process is
    about to end from the watchdog (its records are written first)."""
    run_dir = claimed.run_dir

    def stuck(exc) -> None:  # the watchdog's last words: the process ends without unwinding
        outcome = record_interrupted(run_dir, exc, resume_command)
        if on_stuck is not None:
            on_stuck(outcome)
        release(run_dir)  # only when this process holds it

    last_words(stuck)
    try:
        if claimed.finished is not None:  # the same command again: the run and its records are left as they are
            step = claimed.resume.step or 0  # a finished run is found at its checkpoint's step
            log.info(
                "%s is already finished at step %d; nothing to do (%s)",
                run_dir,
                step,
                to_train_on(claimed.cfg, step),
            )
            return RunOutcome(Outcome.ALREADY_FINISHED, run_dir, summary=claimed.finished)
        # the typed config trains; the composed one is only recorded (config.yaml, the trackers)
        result = fit_run(
            claimed.spec, run_dir, claimed.resume, composed=to_plain(claimed.cfg), origin=origin or RunOrigin()
        )
    except TrainingStopped as exc:  # a ZooError that ends a started run
        return _failed(Outcome.STOPPED, run_dir, str(exc))
    except ZooError as exc:  # the user's to fix (the environment's: exit_status 1, e.g. a network)
        kind = Outcome.STOPPED if getattr(exc, "exit_status", 2) == 1 else Outcome.REFUSED
        return _failed(kind, run_dir, str(exc))
    except TrainingInterrupted as exc:  # SIGTERM / SIGINT: last.ckpt saved
        return record_interrupted(run_dir, exc, resume_command)
    except Exception as exc:
        known = known_failure(exc, run_dir)
        outcome = _failed(Outcome.STOPPED, run_dir, known or f"{type(exc).__name__}: {exc}")
        if known is None:
            raise
        return outcome
    finally:
        last_words(None)
        claimed.give_back()
    if result.requeued is not None:
        return RunOutcome(
            Outcome.REQUEUED, run_dir, requeued=result.requeued, task=result.task, is_global_zero=result.is_global_zero
        )
    assert result.summary is not None  # only a requeued run writes none
    return RunOutcome(
        Outcome.FINISHED,
        run_dir,
        summary=result.summary.as_dict(),
        task=result.task,
        is_global_zero=result.is_global_zero,
    )


def _failed(kind: Outcome, run_dir: Path, message: str) -> RunOutcome:
    failure = RunFailure(error=message)
    return RunOutcome(kind, run_dir, failure=failure, recorded=record_failure(run_dir, failure))


def followers_of_max_steps(cfg) -> dict[str, Any]:
    """The keys a resume compares whose value follows trainer.max_steps in `cfg` (a composed
    config, its interpolations unresolved: e.g. -cn quick's `scheduler.warmup_steps:
    ${zoo.share_of_steps:0.1}`) -> their value now. A longer run must keep these values to
    continue its checkpoint, so the message that says how to train on names them. Found by
    resolving the config again with twice the steps; {} where it cannot be resolved."""
    from omegaconf import OmegaConf, open_dict

    try:
        steps = int(OmegaConf.select(cfg, "trainer.max_steps"))
        longer = cfg.copy()
        with open_dict(longer):
            longer.trainer.max_steps = 2 * max(steps, 1)
        now: dict[str, Any] = {}
        later: dict[str, Any] = {}
        for section in COMPARED:
            if section in cfg:
                flatten(section, OmegaConf.to_container(cfg[section], resolve=True), now)
                flatten(section, OmegaConf.to_container(longer[section], resolve=True), later)
    except Exception:  # noqa: BLE001 - a value resolved only at run time: nothing to name
        return {}
    return {
        key: value
        for key, value in now.items()
        if later.get(key) != value and key.split(".")[1] not in MAY_CHANGE.get(key.split(".")[0], ())
    }


def to_train_on(cfg, step: int) -> str:
    """What a finished run needs to train on: a larger trainer.max_steps, and every key that
    follows it kept at the run's value, as overrides (e.g. `trainer.max_steps=200
    scheduler.warmup_steps=10`)."""
    pinned = " ".join(f"{key}={as_override(value)}" for key, value in followers_of_max_steps(cfg).items())
    longer = f"trainer.max_steps={2 * max(step, 1)}"
    if not pinned:
        return f"raise trainer.max_steps to train on, e.g. {longer}"
    return (
        f"to train on, raise trainer.max_steps and keep the run's value of each key that follows it: "
        f"e.g. {longer} {pinned}"
    )
