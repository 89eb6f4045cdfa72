"""A tracker writes inside the run unless a server is named on the command line: a store
elsewhere is refused with nothing created, a server a config file names is refused, and
MLflow's store and artifacts land in the run directory, not the working directory."""

from __future__ import annotations

import pytest

from zoo.config.errors import ConfigError
from zoo.config.safety.trackers import check_tracking_uri, store_in_run


def _one_line(result, words: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr[-2000:]


@pytest.mark.parametrize("uri", ["sqlite:////ELSEWHERE/x.db", "sqlite:///../x.db", "file://ELSEWHERE/x", "ELSEWHERE/x"])
def test_a_store_outside_the_run_is_refused_and_not_created(cli_here, tmp_path, uri):
    from tests.cli.conftest import tiny_overrides

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    uri = uri.replace("/ELSEWHERE", str(elsewhere)).replace("ELSEWHERE", str(elsewhere))
    run = tmp_path / "runs" / "run"
    result = cli_here("train", *tiny_overrides(run), "logger=mlflow", f"logger.mlflow.tracking_uri={uri}")
    _one_line(result, "a tracker's store lies in the run directory")
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "runs" / "x.db").exists()
    assert not run.exists()


def test_a_server_named_by_a_config_file_is_refused(cli_here, tmp_path):
    from tests.cli.conftest import tiny_overrides

    (tmp_path / "evil.yaml").write_text(
        "defaults:\n  - config\n  - override logger: mlflow\n  - _self_\n"
        "logger:\n  mlflow:\n    tracking_uri: http://127.0.0.1:9\n"
    )
    result = cli_here("train", "-cd", str(tmp_path), "-cn", "evil", *tiny_overrides(tmp_path / "run"))
    _one_line(result, "a tracking server is named on the command line")
    assert not (tmp_path / "run").exists()


def test_a_server_named_by_a_config_files_sweep_is_refused(cli_here, tmp_path):
    from tests.cli.conftest import tiny_overrides

    (tmp_path / "evil.yaml").write_text(
        "defaults:\n  - config\n  - override logger: mlflow\n  - _self_\n"
        "hydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      logger.mlflow.tracking_uri: http://127.0.0.1:9\n"
    )
    result = cli_here(
        "train", "-cd", str(tmp_path), "-cn", "evil", *tiny_overrides(), f"hydra.sweep.dir={tmp_path / 'sweep'}"
    )
    _one_line(result, "a tracking server is named on the command line")
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    "uri, words",
    [
        ("https://host:99999", "its port is not a number"),
        ("http://", "names its host"),
        ("databricks", "lies in the run directory"),
        ("sqlite:///a\nb.db", "on one line"),
    ],
)
def test_a_tracking_uri_mlflow_cannot_use_is_one_line(uri, words):
    with pytest.raises(ConfigError, match=words):
        check_tracking_uri(uri, {uri})


def test_a_server_on_the_command_line_and_a_store_in_the_run_are_taken(tmp_path):
    check_tracking_uri("http://127.0.0.1:5000", {"http://127.0.0.1:5000"})
    check_tracking_uri("sqlite:///stores/mlflow.db", set())
    check_tracking_uri(None, set())
    assert store_in_run("sqlite:///stores/mlflow.db", tmp_path) == f"sqlite:///{tmp_path.resolve()}/stores/mlflow.db"
    assert store_in_run("http://h:1", tmp_path) == "http://h:1"


@pytest.mark.slow
def test_mlflows_default_store_and_artifacts_lie_in_the_run(cli_here, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from tests.cli.conftest import tiny_overrides

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = tmp_path / "run"
    result = cli_here(
        "train", *tiny_overrides(run), "trainer.max_steps=3", "trainer.val_check_interval=3", "logger=mlflow"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run / "mlflow.db").is_file() and (run / "mlartifacts").is_dir()
    assert sorted(p.name for p in cwd.iterdir()) == []  # no ./mlflow.db, no ./mlruns
