"""The loggers of a run: a CSV metrics file in the run directory that survives resuming,
TensorBoard's event files when asked for, and the experiment trackers MLflow and W&B
(`zoo.training.tracking.experiment_trackers`).

Lightning's CSVLogger deletes an existing metrics.csv when its directory is not empty; a
resumed run must keep the rows of the steps it is not going to repeat and drop those it is."""

from __future__ import annotations

import copy
import csv
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, Logger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from zoo.config.records.atomic import replacing
from zoo.config.records.rundir import RunDir
from zoo.config.schema.root import ZooConfig
from zoo.training.origin import RunOrigin
from zoo.training.tracking.experiment_trackers import RunMLflowLogger, RunWandbLogger
from zoo.training.tracking.identity import run_identity


class _ResumingWriter(ExperimentWriter):
    NAME_METRICS_FILE = RunDir.METRICS
    NAME_HPARAMS_FILE = RunDir.HPARAMS

    def __init__(self, log_dir: str, keep_before_step: int | None) -> None:
        self._keep_before_step = keep_before_step
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        if not os.path.isfile(self.metrics_file_path):
            return
        if self._keep_before_step is None:  # a fresh run in a used directory: start over
            os.remove(self.metrics_file_path)
            return
        with open(self.metrics_file_path, newline="") as f:
            reader = csv.DictReader(f)
            keys = list(reader.fieldnames or [])
            rows = [
                r for r in reader if r.get("step") not in (None, "") and int(float(r["step"])) < self._keep_before_step
            ]
        # a new file of an unpredictable name, renamed: never written through a planted link
        with replacing(self.metrics_file_path) as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)
        self.metrics_keys = keys


class RunCSVLogger(CSVLogger):
    """Writes run_dir/metrics.csv. `resume_step`: the global step of the checkpoint being
    resumed; rows logged at or after it are dropped (the resumed run logs them again)."""

    def __init__(self, run_dir: str, resume_step: int | None = None) -> None:
        super().__init__(save_dir=run_dir, name="", version="")
        self._resume_step = resume_step

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:  # Lightning's own is typed as fabric's writer
        if self._experiment is None:
            self._experiment = _ResumingWriter(self.log_dir, self._resume_step)
        assert isinstance(self._experiment, ExperimentWriter)  # made here only: a _ResumingWriter
        return self._experiment


def build_loggers(
    spec: ZooConfig, composed: Mapping[str, Any], run_dir: Path, resume_step: int | None, origin: RunOrigin
) -> list[Logger]:
    """metrics.csv (logger.csv) and tb/ (logger.tensorboard) in the run directory, and the
    trackers asked for (logger.mlflow, logger.wandb), told the resolved config `composed`; a
    resumed run keeps the CSV rows of the steps before `resume_step` and logs on into its
    tracker runs; `origin` names the run, its sweep and its arm for them."""
    loggers: list[Logger] = []
    if spec.logger.csv:
        loggers.append(RunCSVLogger(str(run_dir), resume_step=resume_step))
    if spec.logger.tensorboard:
        from lightning.pytorch.loggers import TensorBoardLogger

        loggers.append(TensorBoardLogger(save_dir=str(run_dir), name=RunDir.TENSORBOARD, version=""))
    # (Lightning sets `rank` on rank_zero_only at import; the function's type does not declare it)
    rank = rank_zero_only.rank  # type: ignore[attr-defined]
    if spec.logger.trackers and rank == 0:  # other ranks log nothing: no store opened there
        identity = run_identity(run_dir, spec.seed, origin)
        config = copy.deepcopy(dict(composed))
        resuming = resume_step is not None
        if spec.logger.mlflow.enabled:
            loggers.append(RunMLflowLogger(spec.logger.mlflow, identity, config, run_dir, resuming))
        if spec.logger.wandb.enabled:
            loggers.append(RunWandbLogger(spec.logger.wandb, identity, config, run_dir, resuming))
    return loggers
