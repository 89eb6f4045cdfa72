"""zoo.train(cfg, run_dir) in Python has zoo-train's guarantees: the run directory's lock, the
resume checks, and typed outcomes with their records (zoo.run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import zoo
from tests.cli.conftest import tiny_overrides
from zoo.config.rundir import RunDir, RunFailure
from zoo.run import Outcome

TINY = [o for o in tiny_overrides() if not o.startswith("hydra.")]


@pytest.mark.slow
def test_zoo_train_finishes_then_finds_the_run_finished_and_refuses_a_busy_directory(tmp_path):
    run = tmp_path / "run"
    outcome = zoo.train(zoo.compose(TINY), run)
    assert outcome.kind == Outcome.FINISHED and outcome.exit_status == 0
    assert outcome.summary["status"] == "finished" and "val/loss" in outcome.summary["metrics"]
    assert json.loads(RunDir(run).summary.read_text()) == outcome.summary
    assert not RunDir(run).lock.exists()  # given back

    before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    again = zoo.train(zoo.compose(TINY), run)
    assert again.kind == Outcome.ALREADY_FINISHED and again.summary == outcome.summary
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == before  # nothing rewritten

    # a live process owns the directory: refused, nothing written
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        RunDir(run).lock.write_text(json.dumps({"host": os.uname().nodename, "pid": owner.pid}))
        busy = zoo.train(zoo.compose(TINY), run)
    finally:
        owner.kill()
        owner.wait()
    assert busy.kind == Outcome.REFUSED and busy.exit_status == 2 and not busy.recorded
    assert "is in use by a running zoo-train" in busy.message
    assert not RunDir(run).failed.exists()


def test_a_config_mistake_is_refused_with_its_record(tmp_path):
    outcome = zoo.train(zoo.compose([*TINY, "data.global_batch_size=3", "trainer=ddp_cpu"]), tmp_path / "run")
    assert outcome.kind == Outcome.REFUSED and outcome.exit_status == 2 and outcome.recorded
    assert "divisible" in outcome.message
    assert RunFailure.read(tmp_path / "run") == outcome.failure
    assert not RunDir(tmp_path / "run").lock.exists()


def test_a_directory_with_someone_elses_files_is_refused_untouched(tmp_path):
    (tmp_path / "config.yaml").write_text("mine: true\n")
    outcome = zoo.train(zoo.compose(TINY), tmp_path)
    assert outcome.kind == Outcome.REFUSED and "holds files but no zoo run" in outcome.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]
    assert (tmp_path / "config.yaml").read_text() == "mine: true\n"
