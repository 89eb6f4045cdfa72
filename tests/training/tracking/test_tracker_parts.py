"""The parts of logger=mlflow / logger=wandb that need no training run: a run's arm from its
overrides and its sweep's multirun.yaml, the summary's figures, the config as MLflow
parameters, W&B's mode, the logger schema's refusals, and how `closing_trackers` ends a real
MLflow run (a sqlite store in a temporary directory) for each way a run can end."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml

from zoo.config.errors import ConfigError
from zoo.config.schema.logger import LoggerConfig, MLflowConfig, WandbConfig, WandbMode
from zoo.training.stops import TrainingInterrupted
from zoo.training.tracking.experiment_trackers import RunMLflowLogger, flat_params, wandb_mode
from zoo.training.tracking.identity import (
    RunIdentity,
    TrackerStatus,
    arm_of,
    closing_trackers,
    read_tracked,
    summary_figures,
    swept_keys,
)


def test_an_arm_is_its_overrides_but_the_seed_and_bookkeeping():
    given = [
        "arm/norm=post_ln",
        "seed=1",
        "data.order_seed=2",
        "model.d_model=64",
        "hydra.run.dir=x",
        "logger=mlflow",
        "logger.mlflow.tracking_uri=http://h:1",
        "hydra/launcher=slurm",
        "+callbacks.x=1",
        "ckpt_path=last",
        "data.cache_dir=/c",
        "+model.bias=false",
    ]
    assert arm_of(given) == "arm/norm=post_ln model.d_model=64 +model.bias=false"
    assert arm_of(given, {"arm/norm", "seed"}) == "arm/norm=post_ln"  # a sweep's: only what it varies
    assert arm_of(["seed=2"], {"seed"}) == ""


def _multirun_yaml(tmp_path: Path, task: list[str], params: dict | None) -> Path:
    path = tmp_path / "multirun.yaml"
    path.write_text(yaml.safe_dump({"hydra": {"overrides": {"task": task}, "sweeper": {"params": params}}}))
    return path


def test_the_swept_keys_come_from_the_command_line_and_the_sweepers_params(tmp_path):
    path = _multirun_yaml(
        tmp_path,
        ["model.d_model=32", "model.norm=pre,post", "optim.lr=range(1,3)", "model/position=glob(r*)", "+x=choice(1,2)"],
        {"arm/norm": "baseline,post_ln", "seed": "0,1,2", "trainer.max_steps": 10},
    )
    assert swept_keys(path) == {"model.norm", "optim.lr", "model/position", "x", "arm/norm", "seed"}
    assert swept_keys(_multirun_yaml(tmp_path, ["a.b=1,2"], None)) == {"a.b"}
    # a sweeper value that interpolates (a resolver Hydra registers only when it runs) is read
    # as written, not resolved
    steps = _multirun_yaml(tmp_path, [], {"model.norm": "pre,post", "trainer.max_steps": "${zoo.steps_for_tokens:4}"})
    assert swept_keys(steps) == {"model.norm"}
    assert swept_keys(tmp_path / "missing.yaml") is None
    (tmp_path / "bad.yaml").write_text("hydra: [1, 2]")
    assert swept_keys(tmp_path / "bad.yaml") is None


def test_the_summary_figures_are_its_numbers_flattened():
    summary = {
        "status": "finished",
        "global_step": 6,
        "replicas_identical": True,
        "sample": "text",
        "init_from": None,
        "metrics": {"val/loss": 2.5, "train/loss": 3},
        "model": {"total_params": 10, "seq_len": 32},
        "baseline": None,
    }
    assert summary_figures(summary) == {
        "summary/global_step": 6.0,
        "summary/metrics/val/loss": 2.5,
        "summary/metrics/train/loss": 3.0,
        "summary/model/total_params": 10.0,
        "summary/model/seq_len": 32.0,
    }


def test_the_config_as_mlflow_parameters():
    config = {
        "model": {"d_model": 32, "position": {"kind": "rope"}, "d_ff": None},
        "seed": 0,
        "logger": {"mlflow": {"tags": {}}},
        "data": {"files": ["a", "b"]},
    }
    assert flat_params(config) == {
        "model.d_model": "32",
        "model.position.kind": "rope",
        "model.d_ff": "null",
        "seed": "0",
        "logger.mlflow.tags": "{}",
        "data.files": "['a', 'b']",
    }


def test_wandb_goes_online_only_with_a_key(tmp_path, monkeypatch):
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    monkeypatch.setenv("NETRC", str(netrc))
    auto = WandbConfig()
    assert wandb_mode(auto) == "offline"  # no key anywhere
    netrc.write_text("machine api.wandb.ai\n  login user\n  password 0123456789\n")
    netrc.chmod(0o600)
    assert wandb_mode(auto) == "online"  # `wandb login` wrote this
    netrc.write_text("machine example.org\n  login user\n  password x\n")
    assert wandb_mode(auto) == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert wandb_mode(auto) == "online"
    assert wandb_mode(WandbConfig(mode="offline")) == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode(auto) is None  # W&B's own variable decides
    assert wandb_mode(WandbConfig(mode="online")) == "online"


def test_the_logger_schema_refuses_unknown_and_bad_values():
    assert LoggerConfig().trackers == []
    both = LoggerConfig(mlflow={"enabled": True}, wandb={"enabled": True, "mode": "offline"})
    assert both.trackers == ["mlflow", "wandb"] and both.wandb.mode == WandbMode.offline
    with pytest.raises(ConfigError, match=r"unknown key logger.mlflow.uri; allowed: enabled, experiment"):
        LoggerConfig(mlflow={"uri": "x"})
    with pytest.raises(ConfigError, match=r"logger.wandb.mode='sometimes' is not allowed; choose one of: auto"):
        LoggerConfig(wandb={"mode": "sometimes"})
    with pytest.raises(ConfigError, match="logger.mlflow.experiment must be a name"):
        MLflowConfig(experiment=" ")
    with pytest.raises(ConfigError, match="logger.wandb.project must be a name"):
        WandbConfig(project="")
    with pytest.raises(ConfigError, match="logger.wandb must be a mapping"):
        LoggerConfig(wandb=3)


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def _logger(store: str, run_dir: Path, resuming: bool = False) -> RunMLflowLogger:
    run_dir.mkdir(parents=True, exist_ok=True)
    identity = RunIdentity(name=run_dir.name, run_dir=str(run_dir), sweep=None, arm="model.norm=post", seed=0)
    return RunMLflowLogger(
        MLflowConfig(enabled=True, tracking_uri=store, experiment="ends"),
        identity,
        {"model": {"norm": "post"}, "seed": 0},
        run_dir,
        resuming,
    )


def _status(logger: RunMLflowLogger) -> str:
    return logger.experiment.get_run(logger.run_id).info.status


@pytest.mark.slow
def test_each_way_a_run_ends_is_its_mlflow_status(store, tmp_path):
    finished = _logger(store, tmp_path / "finished")
    with closing_trackers([finished]) as tracked:
        finished.log_hyperparams({"ignored": 1})  # Lightning's call: the run starts with the config
        finished.finalize("success")  # Lightning's end of fit does not end it
        assert _status(finished) == "RUNNING"
        tracked.record({"status": "finished", "global_step": 4, "metrics": {"val/loss": 1.5}})
    assert _status(finished) == TrackerStatus.FINISHED
    run = finished.experiment.get_run(finished.run_id)
    assert run.data.params == {"model.norm": "post", "seed": "0"}
    assert run.data.metrics["summary/metrics/val/loss"] == 1.5

    requeued = _logger(store, tmp_path / "requeued")
    with closing_trackers([requeued]) as tracked:
        requeued.log_hyperparams({})
        tracked.record({"status": "requeued", "global_step": 2})  # not a summary: nothing logged
    assert _status(requeued) == TrackerStatus.KILLED
    assert requeued.experiment.get_run(requeued.run_id).data.metrics == {}

    interrupted = _logger(store, tmp_path / "interrupted")
    with pytest.raises(TrainingInterrupted), closing_trackers([interrupted]):
        interrupted.log_hyperparams({})
        raise TrainingInterrupted(signal.SIGTERM, 3, tmp_path / "last.ckpt")
    assert _status(interrupted) == TrackerStatus.KILLED

    failed = _logger(store, tmp_path / "failed")
    with pytest.raises(ValueError), closing_trackers([failed]):
        failed.log_hyperparams({})
        raise ValueError("a bug")
    assert _status(failed) == TrackerStatus.FAILED

    crashed = _logger(store, tmp_path / "crashed")  # an error inside Lightning's fit
    crashed.log_hyperparams({})
    crashed.finalize("failed")
    assert _status(crashed) == TrackerStatus.FAILED


@pytest.mark.slow
def test_a_resumed_run_finds_its_mlflow_run_and_a_fresh_one_does_not(store, tmp_path):
    first = _logger(store, tmp_path / "run")
    first.log_hyperparams({})
    first.end_run(TrackerStatus.KILLED)
    ids = read_tracked(tmp_path / "run")["mlflow"]
    assert ids["run_id"] == first.run_id and ids["tracking_uri"] == store and ids["experiment"] == "ends"

    resumed = _logger(store, tmp_path / "run", resuming=True)
    resumed.log_hyperparams({})
    assert resumed.run_id == first.run_id and _status(resumed) == "RUNNING"  # running again

    fresh = _logger(store, tmp_path / "run", resuming=False)  # a new run in a used directory
    fresh.log_hyperparams({})
    assert fresh.run_id != first.run_id
    assert read_tracked(tmp_path / "run")["mlflow"]["run_id"] == fresh.run_id

    fresh.experiment.delete_run(fresh.run_id)  # deleted in MLflow: a resume starts a new run
    again = _logger(store, tmp_path / "run", resuming=True)
    again.log_hyperparams({})
    assert again.run_id not in (first.run_id, fresh.run_id)


def test_a_tracker_that_fails_at_the_summary_does_not_undo_a_finished_run(store, tmp_path, caplog):
    gone = _logger(store, tmp_path / "gone")
    with closing_trackers([gone]) as tracked:
        gone.log_hyperparams({})
        gone.experiment.delete_run(gone.run_id)  # deleted in MLflow while the run trains
        tracked.record({"status": "finished", "global_step": 4, "metrics": {"val/loss": 1.5}})
    assert "could not log the summary to the RunMLflowLogger run" in caplog.text


@pytest.mark.slow
def test_parallel_jobs_share_the_experiment_one_of_them_created(store, tmp_path):
    first, second = _logger(store, tmp_path / "a"), _logger(store, tmp_path / "b")
    first.log_hyperparams({})
    # the second job looked the experiment up before the first created it: creating it again
    # must find the first's instead of failing
    assert second._create_or_find("ends") == first.experiment_id
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException):  # what the second job would have met without the fallback
        first.experiment.create_experiment("ends")
