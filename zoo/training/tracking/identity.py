"""What the experiment trackers (logger=mlflow, logger=wandb) are told about a run besides its
metrics: who it is (`RunIdentity`: its directory, its sweep, its arm, its seed), the tracker runs
it already has (tracking.json, so that a resumed run logs on into them), the figures of its
summary, and how its tracker runs end (`closing_trackers`)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.config.records.atomic import write_text
from zoo.config.records.rundir import BOOKKEEPING, RunDir
from zoo.config.records.yaml_files import load_yaml
from zoo.training.origin import RunOrigin
from zoo.training.stops import TrainingInterrupted

log = logging.getLogger("zoo")


@dataclass(frozen=True)
class RunIdentity:
    """A run as the trackers name it."""

    name: str  # the run directory as the command gave it: runs/DATE/TIME, multirun/DATE/TIME/N
    run_dir: str  # the run directory, absolute: where its checkpoints and summary are
    sweep: str | None  # the sweep's directory (multirun/DATE/TIME); None for a single run
    arm: str  # the overrides that make this arm (a sweep's: of the keys it sweeps), but the seed
    seed: int


def run_identity(run_dir: Path, seed: int, origin: RunOrigin) -> RunIdentity:
    """The identity of the run in `run_dir`, from its origin (an arm of a sweep knows its sweep
    and overrides); a run composed without a command (`RunOrigin()`) is a single run with no
    overrides."""
    sweep, overrides, swept = None, list(origin.overrides), None
    if origin.sweep_dir is not None:
        sweep = _shown(origin.sweep_dir)
        swept = swept_keys(origin.sweep_dir / "multirun.yaml")
    return RunIdentity(
        name=_shown(run_dir), run_dir=str(Path(run_dir).resolve()), sweep=sweep, arm=arm_of(overrides, swept), seed=seed
    )


def swept_keys(multirun_yaml: Path) -> set[str] | None:
    """The keys a sweep varies (`model.norm` of `model.norm=pre,post`, `arm/norm` of a recipe's
    hydra.sweeper.params), read from the multirun.yaml Hydra writes into the sweep's directory
    before its jobs start; None when it cannot be read."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    try:
        saved = load_yaml(multirun_yaml)  # checked: a sweep directory may come from anyone
        given = [str(o) for o in saved.hydra.overrides.task]
        params = saved.hydra.sweeper.params
        values = OmegaConf.to_container(params, resolve=False) if params is not None else {}
        if not isinstance(values, dict):  # not a mapping of keys to their values: not Hydra's
            return None
        parsed = OverridesParser.create().parse_overrides(given + [f"{k!s}={v}" for k, v in values.items()])
    except Exception:  # noqa: BLE001 - unreadable or not Hydra's: every override names the arm
        return None
    return {o.key_or_group for o in parsed if o.is_sweep_override()}


def arm_of(overrides: list[str], swept: set[str] | None = None) -> str:
    """The overrides that make an arm, in their order, but the seed and bookkeeping keys
    (`arm/norm=post_ln model.d_model=64` from `arm/norm=post_ln seed=1 model.d_model=64
    hydra.run.dir=X`); with `swept`, only those of the keys a sweep varies."""
    kept = []
    for override in overrides:
        key = override.lstrip("+~").split("=", 1)[0]
        if not _bookkeeping(key) and (swept is None or key in swept):
            kept.append(override)
    return " ".join(kept)


def _bookkeeping(key: str) -> bool:
    """A key (`logger.mlflow.enabled`) or group (`logger`, `hydra/launcher`) that does not change
    what a run learns."""
    return key.startswith(BOOKKEEPING) or (key + ".").startswith(BOOKKEEPING) or key.startswith("hydra/")


def _shown(path: Path) -> str:
    """`path` relative to the working directory when it is inside it, else absolute."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_tracked(run_dir: Path) -> dict:
    """The trackers' run ids this run directory holds ({} when none or unreadable)."""
    path = RunDir(run_dir).tracking
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_tracked(run_dir: Path, tracker: str, ids: dict) -> None:
    """Record `tracker`'s ids in tracking.json (rank 0), keeping the other trackers' entries."""
    path = RunDir(run_dir).tracking
    data = read_tracked(run_dir)
    data[tracker] = ids
    write_text(path, json.dumps(data, indent=1))


def summary_figures(summary: dict) -> dict[str, float]:
    """The numbers of a summary, flattened with '/' under `summary/`:
    summary/global_step, summary/metrics/val/loss, summary/model/total_params, ..."""
    figures: dict[str, float] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}/{k}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            figures[key] = float(value)

    walk(summary, "summary")
    return figures


class TrackerStatus:
    """How a tracker run ends (MLflow's run statuses; W&B takes an exit code)."""

    FINISHED = "FINISHED"  # the run finished and wrote summary.json
    KILLED = "KILLED"  # interrupted (SIGTERM, SIGINT) or requeued: rerunning the command resumes it
    FAILED = "FAILED"  # stopped with an error


def _trackers(loggers: list) -> list:
    return [lg for lg in loggers if hasattr(lg, "end_run")]


@contextlib.contextmanager
def closing_trackers(loggers: list) -> Iterator[Tracked]:
    """Around fit and finish: each tracker run ends once, FINISHED with the summary's figures
    (`Tracked.record`), KILLED when interrupted or requeued, FAILED on any other error.
    Lightning's own end of fit does not end them: the final validation and the summary come
    after it."""
    tracked = Tracked(_trackers(loggers))
    try:
        yield tracked
    except TrainingInterrupted:
        tracked.end(TrackerStatus.KILLED)
        raise
    except BaseException:
        tracked.end(TrackerStatus.FAILED)
        raise
    tracked.end(TrackerStatus.FINISHED if tracked.summary is not None else TrackerStatus.KILLED)


class Tracked:
    def __init__(self, trackers: list) -> None:
        self.trackers = trackers
        self.summary: dict | None = None

    def record(self, summary: dict) -> None:
        """A finished run's summary (a requeued run's is not one: its tracker runs go on later)."""
        if summary.get("status") != "finished":
            return
        self.summary = summary
        for tracker in self.trackers:
            try:
                tracker.log_summary(summary)
            except Exception as exc:  # the run finished and summary.json is written: a tracker's
                log.warning(
                    "could not log the summary to the %s run (%s: %s)",  # failure does not undo it
                    type(tracker).__name__,
                    type(exc).__name__,
                    exc,
                )

    def end(self, status: str) -> None:
        for tracker in self.trackers:
            try:
                tracker.end_run(status)
            except Exception as exc:  # a tracker that cannot be reached does not undo the run
                log.warning("could not end the %s run (%s: %s)", type(tracker).__name__, type(exc).__name__, exc)
