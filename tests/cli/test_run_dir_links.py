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
    pid = 2 ** 22 + 12345  # above any pid this kernel hands out (pid_max is at most 2^22)
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
