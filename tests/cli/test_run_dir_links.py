"""Taking over a dead run's lock writes no file through a link: the new lock record goes to a
new file of an unpredictable name and is renamed over the old one; a link planted at the lock's
own name is refused and its target left alone."""

from __future__ import annotations

import json
import os
import socket

import pytest

from zoo.cli.rundir import acquire, owner_of


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
