"""The beacons by which ranks that torchrun or srun started watch each other
(zoo.training.rank_watch): a rank's beacon outlives its process only when it was killed, and only
ranks of the same launch on the same host are watched. Real processes; the multi-process runs
are in tests/distributed/test_ddp.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from zoo.config.rundir import RunDir
from zoo.training.rank_watch import _alive, _beacon, _beacon_of, _peers

_RANK = """
import os, sys
from pathlib import Path
from zoo.config.rundir import RunDir
from zoo.training.rank_watch import _beacon
_beacon(RunDir(Path(sys.argv[1])), int(sys.argv[2]))
if sys.argv[3] == "killed":
    os._exit(9)  # no interpreter exit: what SIGKILL leaves
"""


@pytest.mark.parametrize("end", ["normal", "killed"])
def test_a_beacon_outlives_its_process_only_when_the_process_was_killed(tmp_path, end):
    run = RunDir(tmp_path)
    proc = subprocess.run([sys.executable, "-c", _RANK, str(tmp_path), "1", end], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == (0 if end == "normal" else 9), proc.stderr[-2000:]
    beacon = _beacon_of(run, 1)
    if end == "normal":
        assert beacon is None and not (run.ranks / "1").exists()
    else:
        assert beacon["host"] == socket.gethostname() and beacon["ppid"] == os.getpid()
        assert not _alive(beacon["pid"])
        assert run.names(".ranks/1")  # a file of zoo's in the run directory


def test_only_ranks_of_this_launch_on_this_host_are_peers(tmp_path):
    run = RunDir(tmp_path)
    _beacon(run, 0)  # this process
    (run.ranks / "1").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid()}))
    (run.ranks / "2").write_text(json.dumps({"host": socket.gethostname(), "pid": 1, "ppid": 999999}))  # an earlier launch
    (run.ranks / "3").write_text(json.dumps({"host": "elsewhere", "pid": 1, "ppid": os.getppid()}))  # another host
    (run.ranks / "4").write_text("not json")
    assert _peers(run, 0) == [(1, os.getpid())]
    assert _alive(os.getpid())
