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
from zoo.config.records.rundir import RunDir, RunFailure
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


def test_a_config_mistake_is_refused_with_nothing_written(tmp_path):
    outcome = zoo.train(zoo.compose([*TINY, "data.global_batch_size=3", "trainer=ddp_cpu"]), tmp_path / "run")
    assert outcome.kind == Outcome.REFUSED and outcome.exit_status == 2 and not outcome.recorded
    assert "divisible" in outcome.message
    assert not (tmp_path / "run").exists()  # as zoo-train: a refused config leaves no directory


def test_a_damaged_checkpoint_of_this_run_is_refused_with_its_record(tmp_path):
    """The directory is this run's (its last.ckpt is damaged): the refusal goes into its
    failed.json, and the lock is given back."""
    run = tmp_path / "run"
    RunDir(run).checkpoints.mkdir(parents=True)
    RunDir(run).last.write_bytes(b"not a checkpoint")
    outcome = zoo.train(zoo.compose(TINY), run)
    assert outcome.kind == Outcome.REFUSED and outcome.exit_status == 2 and outcome.recorded
    assert str(RunDir(run).last) in outcome.message
    assert RunFailure.read(run) == outcome.failure
    assert not RunDir(run).lock.exists()


@pytest.mark.slow
def test_zoo_train_claims_a_run_once(cli_here, tmp_path, monkeypatch):
    """zoo-train validates the config, checks the machine, finds the resume and applies
    init_from once for a run (its claim), however many steps read the claim afterwards."""
    import zoo.cli.compose
    import zoo.config.schema.validate
    import zoo.run.preflight
    import zoo.training.machine
    import zoo.training.resume.point

    calls = {"validate": 0, "check_machine": 0, "prepare_resume": 0, "with_init_from": 0}

    def counted(module, name):  # every binding a caller may read: the module's and the claim's
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counted(zoo.config.schema.validate, "validate")
    counted(zoo.run.preflight, "validate")
    counted(zoo.training.machine, "check_machine")
    counted(zoo.run.preflight, "check_machine")
    counted(zoo.training.resume.point, "prepare_resume")
    counted(zoo.cli.compose, "with_init_from")
    result = cli_here("train", *TINY, f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls == {"validate": 1, "check_machine": 1, "prepare_resume": 1, "with_init_from": 1}


@pytest.mark.slow
def test_a_run_is_claimed_once_and_executed(tmp_path):
    """claim_run then execute, as zoo.train does: the claim holds the lock until execute gives
    it back; a finished run claimed again is already finished, and executing that writes nothing."""
    from zoo.run import claim_run, execute

    run = tmp_path / "run"
    claimed = claim_run(zoo.compose(TINY), run)
    assert claimed.locked and RunDir(run).lock.exists() and claimed.resume.path is None
    assert claimed.spec.trainer["max_steps"] == zoo.compose(TINY).trainer.max_steps
    outcome = execute(claimed)
    assert outcome.kind == Outcome.FINISHED and not RunDir(run).lock.exists()
    again = claim_run(zoo.compose(TINY), run)
    assert again.finished == outcome.summary and again.resume.path == str(RunDir(run).last)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file() and p.name != ".zoo-lock"}
    assert execute(again).kind == Outcome.ALREADY_FINISHED and not RunDir(run).lock.exists()
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == before


def test_a_directory_with_someone_elses_files_is_refused_untouched(tmp_path):
    (tmp_path / "config.yaml").write_text("mine: true\n")
    outcome = zoo.train(zoo.compose(TINY), tmp_path)
    assert outcome.kind == Outcome.REFUSED and "holds files but no zoo run" in outcome.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]
    assert (tmp_path / "config.yaml").read_text() == "mine: true\n"
