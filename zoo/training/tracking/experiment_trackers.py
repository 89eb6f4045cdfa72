"""The experiment trackers, as Lightning loggers of one zoo run: MLflow (`RunMLflowLogger`) and
Weights & Biases (`RunWandbLogger`). Beside the metrics Lightning logs, each records the resolved
config (MLflow parameters, the W&B config), the run's identity (sweep, arm, seed, directory),
the summary's figures when the run finishes, and its own run id in tracking.json, so that a
resumed run logs on into the same tracker run. Their runs end in `zoo.training.tracking.identity`'s
`closing_trackers`, after the summary, not at Lightning's end of fit."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import MLFlowLogger, WandbLogger
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from zoo.config.errors import ConfigError
from zoo.config.records.rundir import RunDir
from zoo.config.schema.logger import MLflowConfig, WandbConfig
from zoo.training.tracking.identity import RunIdentity, TrackerStatus, read_tracked, summary_figures, write_tracked
from zoo.training.tracking.settings import mlflow_artifacts, mlflow_uri, wandb_key_set, wandb_mode, wandb_online  # noqa: F401

log = logging.getLogger("zoo")


def flat_params(config: dict, prefix: str = "") -> dict[str, str]:
    """A nested config as MLflow parameters: dotted keys, values as text (lists as written)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_params(value, f"{name}."))
        else:
            out[name] = "null" if value is None else str(value)
    return out


class RunMLflowLogger(MLFlowLogger):
    """MLflow run of a zoo run: experiment = logger.mlflow.experiment, else the sweep's
    directory, else the run's; run name = the run directory; tags zoo.run_dir, zoo.sweep,
    zoo.arm, zoo.seed; parameters = the resolved config; summary/... metrics and the files
    config.yaml and summary.json as artifacts when it finishes."""

    def __init__(
        self, settings: MLflowConfig, identity: RunIdentity, config: dict, run_dir: Path, resuming: bool
    ) -> None:
        uri = mlflow_uri(settings, run_dir)  # a store of the run lies in its directory
        before = read_tracked(run_dir).get("mlflow", {}) if resuming else {}
        # a resume keeps the experiment it started in, from whatever directory it is run
        experiment = settings.experiment or before.get("experiment") or identity.sweep or identity.name
        same_place = before.get("tracking_uri") == uri and before.get("experiment") == experiment
        tags = {"zoo.run_dir": identity.run_dir, "zoo.arm": identity.arm, "zoo.seed": str(identity.seed)}
        if identity.sweep:
            tags["zoo.sweep"] = identity.sweep
        tags.update({str(k): str(v) for k, v in settings.tags.items()})
        super().__init__(
            experiment_name=experiment,
            run_name=identity.name,
            tracking_uri=uri,
            tags=tags,
            run_id=before.get("run_id") if same_place else None,
            artifact_location=mlflow_artifacts(settings, run_dir),
        )
        self._config, self._run_dir, self._ended = config, Path(run_dir), False
        self._lost_at: int | None = None  # the step from which the server did not take metrics

    @property
    @rank_zero_experiment
    def experiment(self):
        first = not self._initialized
        if first and self._run_id is not None and not self._still_there(self._run_id):
            log.warning("the MLflow run %s this run logged into is gone; logging into a new one", self._run_id)
            self._run_id = None
        if first and self._run_id is None and self._experiment_id is None:
            self._experiment_id = self._experiment_for(self._experiment_name)
        client = super().experiment
        if first:
            self._started(client)
        return client

    def _still_there(self, run_id: str) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            return self._mlflow_client.get_run(run_id).info.lifecycle_stage == "active"
        except MlflowException:
            return False

    def _experiment_for(self, name: str) -> str:
        """The id of the MLflow experiment `name`, created when there is none."""
        found = self._mlflow_client.get_experiment_by_name(name)
        if found is not None and found.lifecycle_stage == "active":
            return found.experiment_id
        if found is not None:
            raise ConfigError(
                f"the MLflow experiment {name!r} is deleted (in the trash); restore it, delete "
                f"it for good (mlflow gc), or set logger.mlflow.experiment"
            )
        return self._create_or_find(name)

    def _create_or_find(self, name: str) -> str:
        """Create the experiment `name`; when another job of the sweep created it since this one
        looked (`hydra/launcher=slurm` starts them together), use that one."""
        from mlflow.exceptions import MlflowException

        try:
            created = self._mlflow_client.create_experiment(name, artifact_location=self._artifact_location)
        except MlflowException as exc:  # another job of the sweep created it a moment ago
            if getattr(exc, "error_code", "") != "RESOURCE_ALREADY_EXISTS":
                raise
            found = self._mlflow_client.get_experiment_by_name(name)
            assert found is not None  # the store refused to create it because it is there
            return found.experiment_id
        log.info("MLflow experiment %r created at %s", name, self._tracking_uri)
        return created

    def _started(self, client) -> None:
        """Once, when the MLflow run is created or found again: record its ids, mark a resumed
        run running again, log the config's parameters it does not have yet (MLflow refuses to
        change a parameter; a resumed run's config matches, its bookkeeping keys may not)."""
        from mlflow.entities import Param
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

        write_tracked(
            self._run_dir,
            "mlflow",
            {
                "tracking_uri": self._tracking_uri,
                "experiment": self._experiment_name,
                "experiment_id": self._experiment_id,
                "run_id": self._run_id,
            },
        )
        run = client.get_run(self._run_id)
        if run.info.status != "RUNNING":
            client.update_run(self._run_id, status="RUNNING")
        have = run.data.params
        params = [Param(k, v[:MAX_PARAM_VAL_LENGTH]) for k, v in flat_params(self._config).items() if k not in have]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 parameters a call
            client.log_batch(self._run_id, params=params[i : i + 100])

    @rank_zero_only
    def log_hyperparams(self, params: Any) -> None:
        """Lightning's call with the task's hyperparameters: the run's parameters are the
        resolved config instead, logged when the MLflow run starts."""
        _ = self.experiment

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Lightning's metrics, as MLFlowLogger logs them, until the server stops answering
        (after MLflow's own retries): then one warning, the step in tracking.json, and training
        goes on without MLflow (metrics.csv keeps every step); the summary and the run's end are
        tried again when the run ends."""
        from mlflow.exceptions import MlflowException

        if self._lost_at is not None:
            return
        try:
            super().log_metrics(metrics, step)
        except (MlflowException, OSError) as exc:  # requests' errors are OSErrors
            self._lost_at = int(step or 0)
            log.warning(
                "MLflow at %s stopped taking metrics at step %d (%s); training goes on, and the "
                "metrics from here are in the other loggers only",
                self._tracking_uri,
                self._lost_at,
                type(exc).__name__,
            )
            ids = read_tracked(self._run_dir).get("mlflow", {})
            write_tracked(self._run_dir, "mlflow", {**ids, "metrics_lost_from_step": self._lost_at})

    @rank_zero_only
    def log_summary(self, summary: dict) -> None:
        """summary.json's figures as summary/... metrics at the final step, and the files
        config.yaml and summary.json as the run's artifacts."""
        import time

        from mlflow.entities import Metric

        stamp, step = int(time.time() * 1000), int(summary.get("global_step") or 0)
        metrics = [Metric(k, v, stamp, step) for k, v in summary_figures(summary).items()]
        for i in range(0, len(metrics), 1000):
            self.experiment.log_batch(self.run_id, metrics=metrics[i : i + 1000])
        files = RunDir(self._run_dir)
        for path in (files.config, files.summary):
            if path.exists():
                self.experiment.log_artifact(self.run_id, str(path))

    @rank_zero_only
    def end_run(self, status: str) -> None:
        if self._initialized and not self._ended:
            self._ended = True
            self.experiment.set_terminated(self.run_id, status)

    @rank_zero_only
    def finalize(self, status: str = "success") -> None:
        """Lightning's end of fit: an error ends the run FAILED; a normal end leaves it to
        `closing_trackers` (the final validation and the summary come after)."""
        if status == "failed":
            self.end_run(TrackerStatus.FAILED)


def new_wandb_id() -> str:
    """A W&B run id as W&B makes them: 8 lowercase letters and digits."""
    import secrets
    import string

    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


class RunWandbLogger(WandbLogger):
    """W&B run of a zoo run: project/entity from logger.wandb, group = the sweep's directory
    (logger.wandb.group), job type = the arm, name = the run directory, config = the resolved
    config and the run's identity, files under the run directory's wandb/; the summary's
    figures in the W&B summary when it finishes."""

    JOB_TYPE_LIMIT = 64  # W&B's longest job type

    def __init__(
        self, settings: WandbConfig, identity: RunIdentity, config: dict, run_dir: Path, resuming: bool
    ) -> None:
        before = read_tracked(run_dir).get("wandb", {}) if resuming else {}
        same_place = before.get("project") == settings.project and before.get("entity") == settings.entity
        run_id = before.get("id") if same_place and before.get("id") else new_wandb_id()
        mode = wandb_mode(settings)
        options: dict[str, Any] = {"mode": mode} if mode else {}  # wandb.init's, past Lightning's
        config = {
            **config,
            "zoo": {"run_dir": identity.run_dir, "sweep": identity.sweep, "arm": identity.arm, "seed": identity.seed},
        }
        super().__init__(
            name=identity.name,
            save_dir=str(run_dir),
            id=run_id,
            project=settings.project,
            entity=settings.entity,
            group=settings.group or identity.sweep,
            job_type=(identity.arm or "default")[: self.JOB_TYPE_LIMIT],
            tags=list(settings.tags) or None,
            config=config,
            **options,
        )
        self._wandb_init.pop("anonymous", None)  # Lightning's default, which W&B now warns about
        self._run_dir, self._ended, self._settings = Path(run_dir), False, settings

    @property
    @rank_zero_experiment
    def experiment(self):
        import wandb

        if self._experiment is None:
            if wandb.run is not None and wandb.run.id != self._id:  # an earlier job's run, left open
                wandb.run.finish()
            run = super().experiment
            write_tracked(
                self._run_dir,
                "wandb",
                {
                    "project": self._settings.project,
                    "entity": self._settings.entity,
                    "id": self._id,
                    "mode": run.settings.mode,
                },
            )
        return self._experiment

    @rank_zero_only
    def log_hyperparams(self, params: Any) -> None:
        """Lightning's call with the task's hyperparameters: the W&B config is the resolved
        config instead, given when the run starts."""
        _ = self.experiment

    @rank_zero_only
    def log_summary(self, summary: dict) -> None:
        self.experiment.summary.update(summary_figures(summary))

    @rank_zero_only
    def end_run(self, status: str) -> None:
        if self._experiment is not None and not self._ended:
            self._ended = True
            if status == TrackerStatus.KILLED:  # W&B shows it preempted, not crashed: rerunning resumes it
                self._experiment.mark_preempting()
            self._experiment.finish(exit_code=0 if status == TrackerStatus.FINISHED else 1)

    @rank_zero_only
    def finalize(self, status: str = "success") -> None:
        if status == "failed":
            self.end_run(TrackerStatus.FAILED)
