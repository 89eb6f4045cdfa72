"""Taking over a dead run's lock writes no file through a link: the new lock record goes to a
new file of an unpredictable name and is renamed over the old one; a link planted at the lock's
own name is refused and its target left alone."""

from __future__ import annotations

import json
import os
import socket

import pytest

from zoo.run.lock import acquire, owner_of


def _dead_owner() -> dict:
    pid = 2**22 + 12345  # above any pid this kernel hands out (pid_max is at most 2^22)
    return {"host": socket.gethostname(), "pid": pid, "slurm_job": None}


def test_a_dead_owners_lock_is_taken_over_without_a_predictable_temporary_name(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".zoo-lock").write_text(json.dumps(_dead_owner()))
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    (run / f".zoo-lock.{os.getpid()}").symlink_to(outside)  # the name the takeover once wrote
    acquire(run)
    assert owner_of(run)["pid"] == os.getpid()
    assert outside.read_text() == "keep me\n"


def test_a_link_at_the_lock_is_refused_and_its_target_kept(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_dead_owner()))
    (run / ".zoo-lock").symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        acquire(run)
    assert json.loads(outside.read_text()) == _dead_owner()


# -- a directory zoo must not write a run into --------------------------------------------------


def _train(cli_here, run, *extra):
    from tests.cli.conftest import tiny_overrides

    return cli_here("train", *tiny_overrides(run), "trainer.max_steps=3", *extra)


def test_a_link_planted_at_the_tokenizer_of_a_fresh_run_directory_is_refused(cli_here, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    (run / "tokenizer").symlink_to(outside, target_is_directory=True)
    result = _train(cli_here, run)
    assert result.returncode == 2 and "is a link" in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in run.iterdir()) == ["tokenizer"]  # nothing written


def test_a_directory_with_someone_elses_files_is_not_a_run_directory(cli_here, tmp_path):
    run = tmp_path / "analysis"
    run.mkdir()
    (run / "config.yaml").write_text("someone: else\n")
    (run / "metrics.csv").write_text("a,b\n1,2\n")
    result = _train(cli_here, run)
    assert result.returncode == 2 and "holds files but no zoo run" in result.stderr, result.stderr[-2000:]
    assert "config.yaml, metrics.csv" in result.stderr
    assert (run / "config.yaml").read_text() == "someone: else\n"
    assert (run / "metrics.csv").read_text() == "a,b\n1,2\n"
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "metrics.csv"]


def test_a_run_directory_keeps_its_owners_own_notes_and_refuses_a_planted_checkpoint_link(tmp_path):
    from zoo.run.lock import ForeignRunDir, check_contents

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / ".hydra").mkdir()
    (run / "notes.md").write_text("my notes")  # a zoo run, with a file of its owner's
    check_contents(run)
    (run / "checkpoints" / "last.ckpt").symlink_to(tmp_path / "elsewhere.ckpt")
    with pytest.raises(ForeignRunDir, match="is a link"):
        check_contents(run)


# -- no link out of a run or sweep directory is followed (zoo.config.records.links) ----------------


def test_a_rerun_does_not_write_through_a_link_planted_in_hydra(cli_here, tmp_path):
    victim = tmp_path / "precious.yaml"
    victim.write_text("keep me\n")
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)  # an earlier run's directory, as it was sent
    (run / ".hydra" / "config.yaml").symlink_to(victim)
    result = _train(cli_here, run)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{run / '.hydra' / 'config.yaml'} is a link out of" in lines[0], result.stderr
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in run.iterdir()) == [".hydra"]


def test_a_sweep_run_again_does_not_write_through_a_link_planted_in_a_job(cli_here, tmp_path):
    from tests.cli.conftest import tiny_overrides

    victim = tmp_path / "precious.yaml"
    victim.write_text("keep me\n")
    sweep = tmp_path / "sweep"
    (sweep / "0" / ".hydra").mkdir(parents=True)
    (sweep / "0" / ".hydra" / "overrides.yaml").symlink_to(victim)
    result = cli_here("train", "-m", *tiny_overrides(), "trainer.max_steps=3", f"hydra.sweep.dir={sweep}", "seed=0,1")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{sweep / '0' / '.hydra' / 'overrides.yaml'} is a link out of" in lines[0], lines
    assert victim.read_text() == "keep me\n"
    assert sorted(str(p.relative_to(sweep)) for p in sweep.rglob("*")) == ["0", "0/.hydra", "0/.hydra/overrides.yaml"]


def test_links_inside_the_run_are_kept_and_only_links_out_refused(tmp_path):
    from zoo.config.records.links import LinkedOut, check_tree, inside
    from zoo.run.lock import check_contents

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / "wandb" / "run-1").mkdir(parents=True)
    (run / "wandb" / "latest-run").symlink_to("run-1", target_is_directory=True)  # W&B's own link
    check_contents(run)
    assert inside(run / "wandb" / "latest-run" / "x", run) == run / "wandb" / "latest-run" / "x"
    (run / "wandb" / "run-1" / "debug.log").symlink_to(tmp_path / "elsewhere.log")
    with pytest.raises(LinkedOut, match="debug.log is a link out of"):
        check_contents(run)
    with pytest.raises(LinkedOut, match="debug.log is a link out of"):
        check_tree(run)


def test_the_link_wandb_makes_to_its_own_service_log_is_passed_over(tmp_path):
    """Every offline W&B run links logs/debug-core.log to W&B's own log outside the run: a rerun
    goes on and zoo-compare reads the run; the same name elsewhere is still refused."""
    from zoo.compare.runs import read_run
    from zoo.config.records.links import LinkedOut
    from zoo.run.lock import check_contents

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("[]\n")
    (run / ".hydra" / "config.yaml").write_text("seed: 0\n")
    logs = run / "wandb" / "offline-run-20260101_000000-abc" / "logs"
    logs.mkdir(parents=True)
    (logs / "debug-core.log").symlink_to(tmp_path / "service.log")
    check_contents(run)
    assert "link" not in (read_run(run).error or "")
    (run / ".hydra" / "debug-core.log").symlink_to(tmp_path / "service.log")
    with pytest.raises(LinkedOut, match="debug-core.log is a link out of"):
        check_contents(run)


def test_a_checkpoint_reached_through_a_link_out_of_the_run_is_refused(tmp_path):
    from zoo.config.errors import ZooError
    from zoo.config.records.rundir import locate_checkpoint

    elsewhere = tmp_path / "elsewhere.ckpt"
    elsewhere.write_bytes(b"PK\x03\x04 not read")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").symlink_to(elsewhere)
    with pytest.raises(ZooError, match="last.ckpt is a link out of"):
        locate_checkpoint(run)


def test_a_resumed_runs_metrics_are_not_rewritten_through_a_planted_link(tmp_path):
    from zoo.training.tracking.loggers import _ResumingWriter

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text("step,train/loss\n0,3.0\n1,2.5\n2,2.0\n")
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    (run / "metrics.csv.tmp").symlink_to(victim)  # the name the rewrite once used
    _ResumingWriter(str(run), keep_before_step=2)
    assert victim.read_text() == "keep me\n"
    assert (run / "metrics.csv").read_text().splitlines() == ["step,train/loss", "0,3.0", "1,2.5"]


def test_ckpt_path_last_looks_at_no_checkpoint_a_link_leads_to(tmp_path):
    from zoo.run.lock import runs_with_checkpoints

    root = tmp_path / "runs"
    for name in ("real", "linked"):
        (root / "2026-01-01" / name / "checkpoints").mkdir(parents=True)
    (root / "2026-01-01" / "real" / "checkpoints" / "last.ckpt").write_bytes(b"PK")
    (tmp_path / "elsewhere.ckpt").write_bytes(b"PK")
    (root / "2026-01-01" / "linked" / "checkpoints" / "last.ckpt").symlink_to(tmp_path / "elsewhere.ckpt")
    assert runs_with_checkpoints(root) == [root / "2026-01-01" / "real"]
