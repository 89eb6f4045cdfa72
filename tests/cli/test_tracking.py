"""logger=mlflow and logger=wandb as a user runs them: a real sweep through `zoo-train -m` with
CSV, MLflow and W&B at once, MLflow's runs read back from a real tracking server (a process on
localhost, sqlite backend) through MLflow's client, W&B's read from the offline run directories
it wrote; a resumed run logging on into its MLflow run; a missing extra, a server that does not
answer, and an online W&B without a key each refused on one line before training."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml
from mlflow.tracking import MlflowClient  # the test extras install mlflow and wandb

from tests.cli.conftest import tiny_overrides
from tests.cli.wandb_offline import read_offline_run
from tests.training.distributed.conftest import free_port, wait_for


def _no_wandb_key(home) -> dict:
    """An environment in which W&B finds no key (no WANDB_API_KEY, an empty home's ~/.netrc)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "MLFLOW_"))}
    env.update(HOME=str(home), NETRC=str(home / ".netrc"))
    return env


def _train(*args: str, env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs from the test's own home: what a tracker writes to the working directory by default
    (MLflow's ./mlruns beside a sqlite store) stays out of the checkout."""
    return subprocess.run(
        [sys.executable, "-m", "zoo.cli.train", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=env["HOME"],
    )


@contextlib.contextmanager
def _mlflow_server(root):
    """`mlflow server` on a free localhost port with a sqlite store and proxied artifacts under
    `root`; yields its URI and the process."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
    ]
    log = (root / "server.log").open("w")
    # no job runner (MLflow's background workers for its GenAI features, a process each);
    # a session of its own, so that teardown stops every process the server started
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(healthy, 120, "the MLflow server's /health", proc)
        yield uri, proc
    finally:
        _stop(proc)
        log.close()


def _stop(proc) -> None:
    """Stop the server and every process of its session (SIGTERM, then SIGKILL after 30 s)."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
    proc.wait()


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    with _mlflow_server(tmp_path_factory.mktemp("mlflow")) as (uri, _):
        yield uri


@pytest.fixture(scope="module")
def tracked_sweep(mlflow_server, tmp_path_factory):
    """A sweep of 2 arms x 1 seed with CSV, MLflow and W&B (offline: no key) at once."""
    root = tmp_path_factory.mktemp("tracked")
    sweep = root / "sweep"
    result = _train(
        "-m",
        *tiny_overrides(),
        "model.norm=pre,post",
        "seed=3",
        "logger=[csv,mlflow,wandb]",
        f"logger.mlflow.tracking_uri={mlflow_server}",
        f"hydra.sweep.dir={sweep}",
        env=_no_wandb_key(root),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert len(jobs) == 2
    return sweep, jobs


def _csv_rows(run_dir, metric: str) -> dict[int, float]:
    with (run_dir / "metrics.csv").open() as f:
        return {int(r["step"]): float(r[metric]) for r in csv.DictReader(f) if r.get(metric)}


def _at_first_checkpoint(args: list[str], env: dict, run_dir, act, timeout: int = 120) -> tuple[int, str, str]:
    """Start `zoo-train ARGS` from the test's home, call `act(proc)` once its first checkpoint
    is written, and return its exit status, stdout and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli.train", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=env["HOME"],
    )
    try:
        wait_for((run_dir / "checkpoints" / "last.ckpt").exists, 180, "the first checkpoint", proc)
        act(proc)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def _shown(path, home) -> str:
    """A directory as the trackers name it: relative to the directory the command ran in."""
    return str(path.relative_to(home))


def _arm(run_dir) -> str:
    overrides = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())
    return next(o for o in overrides if o.startswith("model.norm="))


@pytest.mark.slow
def test_mlflow_holds_the_sweep_as_one_experiment_read_back_through_its_client(mlflow_server, tracked_sweep):
    sweep, jobs = tracked_sweep
    home = sweep.parent  # where the sweep ran
    client = MlflowClient(mlflow_server)
    # the sweep's directory names it, as the command gave it: relative to where it ran
    experiment = client.get_experiment_by_name(_shown(sweep, home))
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == sorted(_shown(j, home) for j in jobs)
    for job in jobs:
        run = runs[_shown(job, home)]
        summary = json.loads((job / "summary.json").read_text())
        config = yaml.safe_load((job / "config.yaml").read_text())
        assert run.info.status == "FINISHED"
        assert json.loads((job / "tracking.json").read_text())["mlflow"]["run_id"] == run.info.run_id
        tags = run.data.tags
        # the arm: the swept key's value only (the seed and the common overrides are not it)
        assert tags["zoo.arm"] == _arm(job) and tags["zoo.seed"] == "3"
        assert tags["zoo.sweep"] == _shown(sweep, home) and tags["zoo.run_dir"] == str(job)
        params = run.data.params  # the resolved config
        assert params["model.norm"] == config["model"]["norm"] and params["model.d_model"] == "32"
        assert float(params["optim.lr"]) == config["optim"]["lr"] and params["logger.mlflow.enabled"] == "True"
        history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/loss")}
        assert history == pytest.approx(_csv_rows(job, "train/loss"))
        assert run.data.metrics["summary/metrics/val/loss"] == pytest.approx(summary["metrics"]["val/loss"])
        assert run.data.metrics["summary/model/total_params"] == summary["model"]["total_params"]
        assert run.data.metrics["summary/tokens_seen"] == summary["tokens_seen"]
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"config.yaml", "summary.json"}
        (job.parent / "dl").mkdir(exist_ok=True)
        local = client.download_artifacts(run.info.run_id, "summary.json", str(job.parent / "dl"))
        assert json.loads(open(local).read()) == summary
    # the two arms are told apart, as zoo-compare tells them apart
    assert {r.data.tags["zoo.arm"] for r in runs.values()} == {"model.norm=pre", "model.norm=post"}


@pytest.mark.slow
def test_wandb_offline_runs_hold_the_sweep_as_a_group_of_arms(tracked_sweep):
    sweep, jobs = tracked_sweep
    home = sweep.parent  # where the sweep ran
    ids = set()
    for job in jobs:
        (directory,) = (job / "wandb").glob("offline-run-*")  # offline: no key in the environment
        run = read_offline_run(directory)
        summary = json.loads((job / "summary.json").read_text())
        tracked = json.loads((job / "tracking.json").read_text())["wandb"]
        assert run.run_id == tracked["id"] and tracked["mode"] == "offline"
        ids.add(run.run_id)
        assert (run.project, run.group, run.job_type) == ("zoo", _shown(sweep, home), _arm(job))
        assert run.name == _shown(job, home)
        assert run.config["model"]["norm"] == yaml.safe_load((job / "config.yaml").read_text())["model"]["norm"]
        assert run.config["zoo"] == {"run_dir": str(job), "sweep": _shown(sweep, home), "arm": _arm(job), "seed": 3}
        logged = {int(h["trainer/global_step"]): h["train/loss"] for h in run.history if "train/loss" in h}
        assert logged == pytest.approx(_csv_rows(job, "train/loss"))
        assert run.summary["summary/metrics/val/loss"] == pytest.approx(summary["metrics"]["val/loss"])
        assert run.summary["summary/global_step"] == summary["global_step"]
        assert run.exit_code == 0
    assert len(ids) == 2  # one W&B run per job, not one run the second job reused


@pytest.mark.slow
def test_a_resumed_run_logs_on_into_its_tracker_runs(mlflow_server, tmp_path):
    """SIGTERM, then the command again: one MLflow run, KILLED then FINISHED with the steps of
    both parts; one W&B run id, its first part marked preempting (not crashed)."""
    run_dir = tmp_path / "run"
    args = [
        *tiny_overrides(run_dir),
        "trainer.max_steps=120",
        "trainer.val_check_interval=40",
        "callbacks.checkpoint_every_n_steps=10",
        "logger=[csv,mlflow,wandb]",
        f"logger.mlflow.tracking_uri={mlflow_server}",
        "logger.mlflow.experiment=resumed",
    ]
    env = _no_wandb_key(tmp_path)
    status, _, err = _at_first_checkpoint(args, env, run_dir, lambda proc: proc.send_signal(signal.SIGTERM))
    assert status == 128 + signal.SIGTERM, err[-2000:]
    client = MlflowClient(mlflow_server)
    run_id = json.loads((run_dir / "tracking.json").read_text())["mlflow"]["run_id"]
    stopped = json.loads((run_dir / "failed.json").read_text())["step"]
    assert client.get_run(run_id).info.status == "KILLED"
    (first,) = (run_dir / "wandb").glob("offline-run-*")
    stopped_wandb = read_offline_run(first)
    assert stopped_wandb.preempting and stopped_wandb.exit_code == 1

    again = _train(*args, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((run_dir / "tracking.json").read_text())["mlflow"]["run_id"] == run_id
    experiment = client.get_experiment_by_name("resumed")
    assert [r.info.run_id for r in client.search_runs([experiment.experiment_id])] == [run_id]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(run_id, "train/loss"))
    assert steps[0] == 0 and steps[-1] == 119 and stopped < 119  # before and after the stop, one run
    assert run.data.metrics["summary/global_step"] == 120
    # offline-run-DATE_TIME-ID: the stopped part first, then the resumed one under the same id
    parts = [read_offline_run(d) for d in sorted((run_dir / "wandb").glob("offline-run-*"))]
    assert len(parts) == 2 and {p.run_id for p in parts} == {stopped_wandb.run_id}
    assert parts[0].preempting and parts[1].exit_code == 0 and not parts[1].preempting
    logged = sorted(int(h["trainer/global_step"]) for p in parts for h in p.history if "train/loss" in h)
    assert logged[0] == 0 and logged[-1] == 119


@pytest.mark.slow
def test_a_server_that_goes_away_mid_run_costs_its_metrics_not_the_run(tmp_path):
    """The MLflow server stops while the run trains: one warning naming the step, the step in
    tracking.json, and the run finishes with every step in metrics.csv; what the server took
    before it went stays in its store."""
    run_dir, max_steps = tmp_path / "run", 200
    env = dict(_no_wandb_key(tmp_path), MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5")
    with _mlflow_server(tmp_path) as (uri, server):
        args = [
            *tiny_overrides(run_dir),
            f"trainer.max_steps={max_steps}",
            "trainer.val_check_interval=50",
            "callbacks.checkpoint_every_n_steps=10",
            "logger=[csv,mlflow]",
            f"logger.mlflow.tracking_uri={uri}",
        ]
        seen = {}

        def stop_server(proc) -> None:
            seen["run_id"] = json.loads((run_dir / "tracking.json").read_text())["mlflow"]["run_id"]
            _stop(server)

        status, out, err = _at_first_checkpoint(args, env, run_dir, stop_server, timeout=300)
    assert status == 0, err[-3000:]
    run_id = seen["run_id"]
    lost = json.loads((run_dir / "tracking.json").read_text())["mlflow"]
    assert lost["run_id"] == run_id and 10 <= lost["metrics_lost_from_step"] < max_steps - 1
    warned = [line for line in out.splitlines() if "stopped taking metrics" in line]  # the console log
    assert len(warned) == 1 and f"at step {lost['metrics_lost_from_step']} " in warned[0]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    assert sorted(_csv_rows(run_dir, "train/loss")) == list(range(max_steps))
    store = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")  # the stopped server's own store
    steps = sorted(m.step for m in store.get_metric_history(run_id, "train/loss"))
    assert steps and steps[-1] < lost["metrics_lost_from_step"]


@pytest.mark.slow
def test_a_missing_tracker_package_is_one_line_before_training(tmp_path):
    """`mlflow` (or `wandb`) not importable: sys.modules[name] = None is how Python marks a
    module that cannot be imported, set here by a sitecustomize the child process loads."""
    for tracker in ("mlflow", "wandb"):
        site = tmp_path / tracker
        site.mkdir()
        (site / "sitecustomize.py").write_text(f"import sys\nsys.modules[{tracker!r}] = None\n")
        env = dict(_no_wandb_key(tmp_path), PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
        run_dir = tmp_path / f"run-{tracker}"
        result = _train(*tiny_overrides(run_dir), f"logger={tracker}", env=env)
        assert result.returncode == 2, result.stderr[-2000:]
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"logger={tracker} needs {tracker}" in lines[0] and f".[{tracker}]" in lines[0]
        assert not (run_dir / "checkpoints").exists() and not (run_dir / "metrics.csv").exists()


@pytest.mark.slow
def test_an_mlflow_server_that_does_not_answer_is_one_line_before_training(tmp_path):
    run_dir = tmp_path / "run"
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    start = time.monotonic()
    result = _train(
        *tiny_overrides(run_dir), "logger=mlflow", f"logger.mlflow.tracking_uri={uri}", env=_no_wandb_key(tmp_path)
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach the MLflow tracking server at {uri}" in lines[0]
    assert time.monotonic() - start < 60  # not MLflow's minutes of retries
    assert not (run_dir / "checkpoints").exists()


@pytest.mark.parametrize("online", [["logger.wandb.mode=online"], ["WANDB_MODE=online"]], ids=["setting", "env"])
@pytest.mark.slow
def test_online_wandb_without_a_key_is_one_line_before_training(tmp_path, online):
    run_dir = tmp_path / "run"
    env = _no_wandb_key(tmp_path)
    args = [*tiny_overrides(run_dir), "logger=wandb"]
    if online[0].startswith("WANDB_MODE"):
        env["WANDB_MODE"] = "online"  # mode=auto defers to W&B's own variable
    else:
        args += online
    result = _train(*args, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{online[0]} needs a W&B API key" in lines[0]
    assert not (run_dir / "wandb").exists() and not (run_dir / "checkpoints").exists()


@pytest.mark.slow
def test_a_two_rank_run_is_one_tracker_run(tmp_path):
    """trainer=ddp_cpu: only rank 0 builds the trackers; a sqlite store in the run directory and
    W&B offline each get one run with every step."""
    run_dir = tmp_path / "run"
    store = run_dir / "mlflow.db"  # sqlite:///mlflow.db: in the run directory
    result = _train(
        *tiny_overrides(run_dir),
        "trainer=ddp_cpu",
        "logger=[csv,mlflow,wandb]",
        "logger.mlflow.tracking_uri=sqlite:///mlflow.db",
        env=_no_wandb_key(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("run")  # the run's directory, relative to where it ran
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "train/loss"))
    assert steps == sorted(_csv_rows(run_dir, "train/loss"))
    (offline,) = (run_dir / "wandb").glob("offline-run-*")
    assert read_offline_run(offline).exit_code == 0
