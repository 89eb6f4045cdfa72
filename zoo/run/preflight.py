"""A run claimed once before anything trains (`claim_run`): the config validated, the data
files and this machine checked, the run directory chosen and locked, the checkpoint it resumes
found and held against the command. zoo-train claims it before Hydra writes into the directory;
`zoo.train` claims it from Python; `zoo.run.lifecycle.execute` runs it. ("Plan" is the memory planner's word: `zoo.plan`.)"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoo.config.errors import CheckpointError, ConfigError, ZooError
from zoo.config.records.rundir import RunDir, RunFailure
from zoo.config.schema.data import DataSource
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.validate import validate
from zoo.data.files import check_local_paths
from zoo.run.lock import _alive, acquire, claim_default, held_here, owner_of, release, runs_with_checkpoints
from zoo.run.rank import launch_rank
from zoo.run.records import record_failure
from zoo.training.machine import check_machine
from zoo.training.resume.match import ResumeMismatch

if TYPE_CHECKING:  # omegaconf, and torch behind the resume point, load only where they are used
    from omegaconf import DictConfig

    from zoo.training.resume.point import Resume


class RunRefused(ZooError):
    """A run that cannot start. `recorded_in`: the run directory whose failed.json says so (the
    directory is this run's, e.g. its checkpoint is damaged); None where nothing was written (a
    config mistake, another run's directory)."""

    def __init__(self, message: str, recorded_in: Path | None = None):
        super().__init__(message)
        self.recorded_in = recorded_in


@dataclass(frozen=True)
class ClaimedRun:
    """What `execute` runs: the composed config and its validated schema, the run directory,
    the checkpoint it continues (`resume.path` None: a fresh start), the summary of a finished
    run that this command would only repeat, and whether this process holds the lock."""

    cfg: DictConfig  # the composed config, as zoo.compose returns it
    spec: ZooConfig
    run_dir: Path
    resume: Resume
    finished: dict[str, Any] | None = None
    locked: bool = False

    def give_back(self) -> None:
        """The directory's lock, when this claim took it (a second call does nothing)."""
        if self.locked:
            release(self.run_dir)


def check(cfg: DictConfig) -> ZooConfig:
    """The checks that need no run directory: the config, its local data files, this machine.
    Nothing is written; a mistake raises a ZooError on one line."""
    spec = validate(cfg)
    if spec.data.source == DataSource.local:  # a missing, empty or unknown file: before torch loads
        check_local_paths(spec.data.path, spec.data.val_path)
    check_machine(spec)
    return spec


def claim_run(
    cfg: DictConfig,
    run_dir: str | os.PathLike,
    *,
    lock: bool = True,
    rename_if_taken: bool = False,
    spec: ZooConfig | None = None,
    record_refusals: bool = False,
) -> ClaimedRun:
    """`cfg` (composed by `zoo.compose`) claimed in `run_dir`: checked, its directory locked, its resume found.

    `lock`: rank 0 takes the directory's lock (a live owner, or a directory holding files but
    no zoo run, is refused with nothing written); the claim's `locked` says whether it did, and
    `execute` gives it back. `rename_if_taken`: a directory that exists already is not used;
    the first free `run_dir-N` is (zoo-train's default runs/DATE/TIME, for two runs started in
    the same second). `spec`: the result of `check(cfg)`, when the caller has it.
    `record_refusals`: the directory is this run's already (Hydra made it for a job of a sweep),
    so a config, data or machine refusal is written as its failed.json too.

    Raises RunRefused (a ZooError) for a run that cannot start."""
    from zoo.training.resume.point import already_finished, prepare_resume  # torch: after the checks

    run_dir = Path(run_dir)
    spec = spec if spec is not None else _checked(cfg, run_dir if record_refusals else None)
    locked = False
    if launch_rank() == 0:
        try:
            if rename_if_taken:
                run_dir = claim_default(run_dir)
            if lock and not held_here(run_dir):
                acquire(run_dir)
                locked = True
        except ZooError as exc:  # a live owner, or someone else's files: left as they are
            raise RunRefused(str(exc)) from None
        except OSError as exc:
            raise RunRefused(f"run directory {run_dir}: {exc.strerror or exc}") from None
    try:
        resume = prepare_resume(spec, run_dir)
        finished = already_finished(spec, run_dir, resume)
    except ResumeMismatch as exc:  # the directory holds another run: its records stay as they are
        _give_back(run_dir, locked, made=rename_if_taken)
        raise RunRefused(str(exc)) from None
    except (ConfigError, CheckpointError) as exc:  # this run's own checkpoint: said in its failed.json
        if rename_if_taken:  # a directory made just now for this command: gone again, nothing written
            _give_back(run_dir, locked, made=True)
            raise RunRefused(str(exc)) from None
        recorded = _record(run_dir, str(exc))
        _give_back(run_dir, locked)
        raise RunRefused(str(exc), recorded_in=run_dir if recorded else None) from None
    except BaseException:
        _give_back(run_dir, locked)
        raise
    return ClaimedRun(cfg=cfg, spec=spec, run_dir=run_dir, resume=resume, finished=finished, locked=locked)


def latest_run(spec: ZooConfig, root: Path) -> Path:
    """`ckpt_path=last` with no run directory named: the most recently saved run under `root`
    (ROOT/DATE/TIME) that this command describes (the same check as any resume) and whose owner
    is not running. RunRefused when there is none."""
    from zoo.training.resume.point import check_resume_config  # torch: after the checks

    candidates = runs_with_checkpoints(root)
    for run in candidates:
        owner = owner_of(run)
        if owner and _alive(owner):
            continue
        try:
            check_resume_config(str(RunDir(run).last), spec)
        except (ConfigError, CheckpointError):
            continue
        return run
    if not candidates:
        raise RunRefused(
            f"ckpt_path=last: no run under {root}/ has a checkpoints/last.ckpt (it looks at zoo's own "
            f"{root}/DATE/TIME directories); start a run first, or give hydra.run.dir=DIR of the run to resume"
        )
    raise RunRefused(
        f"ckpt_path=last: none of the {len(candidates)} run(s) under {root}/ with a checkpoint was "
        f"made by this command (model, data, tokenizer, task, optimizer and schedule must match); "
        f"give hydra.run.dir=DIR to name one"
    )


def _checked(cfg, record_in: Path | None = None) -> ZooConfig:
    try:
        return check(cfg)
    except ZooError as exc:
        recorded = record_in is not None and _record(record_in, str(exc))
        raise RunRefused(str(exc), recorded_in=record_in if recorded else None) from None


def _give_back(run_dir: Path, locked: bool, made: bool = False) -> None:
    """The lock given back; a directory `made` for this command (zoo's default runs/DATE/TIME)
    removed with its parents, each only when empty."""
    if locked:
        release(run_dir)
    if made and launch_rank() == 0:
        for directory in (run_dir, run_dir.parent, run_dir.parent.parent):  # TIME, DATE, runs/: if empty
            try:
                directory.rmdir()
            except OSError:
                break


def _record(run_dir: Path, message: str) -> bool:
    """failed.json, from rank 0 (`zoo.run.records`)."""
    return record_failure(run_dir, RunFailure(error=message))
