"""The beacons and heartbeats by which ranks watch each other (zoo.training.distributed.rank_watch): a rank's
beacon outlives its process only when it was killed, only ranks of the same launch on the same
host are watched by their process, and the first rank of another host by its heartbeat, which
goes stale when that process stops beating. Real processes and files; the multi-process runs
are in tests/training/distributed/test_ddp.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from zoo.config.records.rundir import RunDir
from zoo.training.distributed import rank_watch
from zoo.training.distributed.rank_watch import BEAT, _alive, _beacon, _beacon_of, _beat_of, _Heartbeats, _peers

_RANK = """
import os, sys, time
from pathlib import Path
from zoo.config.records.rundir import RunDir
from zoo.training.distributed import rank_watch
rank_watch.BEAT_S = 0.1
rank_watch._beacon(RunDir(Path(sys.argv[1])), int(sys.argv[2]), "L1")
time.sleep(0.5)  # a few beats
if sys.argv[3] == "killed":
    os._exit(9)  # no interpreter exit: what SIGKILL leaves
"""


@pytest.mark.slow
@pytest.mark.parametrize("end", ["normal", "killed"])
def test_a_beacon_outlives_its_process_only_when_the_process_was_killed(tmp_path, end):
    run = RunDir(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", _RANK, str(tmp_path), "1", end], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == (0 if end == "normal" else 9), proc.stderr[-2000:]
    beacon = _beacon_of(run, 1)
    if end == "normal":
        assert beacon is None and not (run.ranks / "1").exists() and not (run.ranks / f"1{BEAT}").exists()
    else:
        assert beacon["host"] == socket.gethostname() and beacon["ppid"] == os.getpid()
        assert beacon["launch"] == "L1" and beacon["local_rank"] == 0
        assert not _alive(beacon["pid"])
        assert int(_beat_of(run, 1)) >= 3  # it beat while it lived
        assert run.names(".ranks/1") and run.names(f".ranks/1{BEAT}")  # files of zoo's in the run directory


def test_only_ranks_of_this_launch_on_this_host_are_peers(tmp_path):
    run = RunDir(tmp_path)
    _beacon(run, 0, "L1")  # this process
    here = socket.gethostname()
    (run.ranks / "1").write_text(json.dumps({"host": here, "pid": os.getpid(), "launch": "L1"}))
    (run.ranks / "2").write_text(json.dumps({"host": here, "pid": 1, "launch": "L0"}))  # an earlier launch
    (run.ranks / "3").write_text(json.dumps({"host": "elsewhere", "pid": 1, "launch": "L1"}))  # another host
    (run.ranks / "4").write_text("not json")
    (run.ranks / "5").write_text("[1, 2]")
    assert _peers(run, 0, "L1") == [(1, os.getpid())]
    assert _alive(os.getpid())


def test_the_heartbeat_is_written_in_place_and_never_through_a_link(tmp_path, monkeypatch):
    """A beat file planted as a link (here, to a file outside the run) is replaced, not followed;
    the beat counts up in the same file."""
    monkeypatch.setattr(rank_watch, "BEAT_S", 0.05)
    run = RunDir(tmp_path / "run")
    run.ranks.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (run.ranks / f"7{BEAT}").symlink_to(outside)
    _beacon(run, 7, "L1")
    time.sleep(0.3)
    first = int(_beat_of(run, 7))
    inode = (run.ranks / f"7{BEAT}").stat().st_ino
    time.sleep(0.3)
    assert int(_beat_of(run, 7)) > first >= 1
    assert (run.ranks / f"7{BEAT}").stat().st_ino == inode and not (run.ranks / f"7{BEAT}").is_symlink()
    assert outside.read_text() == "keep me"


def _other_host(run: RunDir, rank: int, *, launch="L1", local_rank=0, host="elsewhere") -> None:
    (run.ranks / str(rank)).write_text(
        json.dumps({"host": host, "pid": 4242, "local_rank": local_rank, "launch": launch})
    )


def test_a_heartbeat_on_another_host_that_stops_is_named_after_the_stale_time(tmp_path):
    run = RunDir(tmp_path)
    run.ranks.mkdir(parents=True)
    _other_host(run, 2)  # the first rank of another host: watched
    _other_host(run, 3, local_rank=1)  # not the first of its host: its own host watches it
    _other_host(run, 4, launch="L0")  # an earlier launch's leftover
    _other_host(run, 5, host=socket.gethostname())  # this host: watched by its process instead
    for rank in (2, 3, 4, 5):
        (run.ranks / f"{rank}{BEAT}").write_text("1\n")
    beats = _Heartbeats(run, "L1", stale_s=0.4)
    assert beats.watching()
    for n in range(2, 6):  # it keeps beating: never stale
        time.sleep(0.15)
        (run.ranks / f"2{BEAT}").write_text(f"{n}\n")
        assert beats.dead() is None
    time.sleep(0.1)  # no beat from rank 2 since its last, seen 0.1 s ago: not yet stale
    assert beats.dead() is None
    time.sleep(0.4)  # unchanged for 0.5 s of this clock; the others were never watched
    died = beats.dead()
    assert died is not None and died.startswith("rank 2 (host elsewhere, pid 4242) stopped answering: no heartbeat for")
    assert "no checkpoint had been written yet" in died


def test_no_other_host_no_heartbeat_watch(tmp_path):
    run = RunDir(tmp_path)
    _beacon(run, 0, "L1")
    _other_host(run, 1, host=socket.gethostname())
    beats = _Heartbeats(run, "L1", stale_s=0.1)
    assert not beats.watching() and beats.dead() is None


_OBSERVED = """
import subprocess, sys
from pathlib import Path
from lightning.fabric.strategies.launchers.subprocess_script import _ChildProcessObserver
from zoo.training.distributed import rank_watch
rank_watch.GRACE_S = 0.2
child = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({sys.argv[2]})"])
child.wait()
observer = _ChildProcessObserver(main_pid=__import__("os").getpid(), child_processes=[child], sleep_period=3600)
observer.start()  # asleep: its poll is made below, at once
watch = rank_watch.RankWatch(Path(sys.argv[1]))
watch._procs = [child]
watch._take_over_observer()
watch._take_over_observer()  # a second stage's setup: installed once
observer._run()  # Lightning's own poll: the child ended non-zero
print("not ended")
"""


@pytest.mark.slow
@pytest.mark.parametrize("status", [3, 143])
def test_lightnings_observer_ends_rank_0_through_the_watch(tmp_path, status):
    """Lightning's observer, seeing a rank it started end non-zero, SIGKILLs rank 0 without a
    word; taken over, a death (status 3) is recorded in failed.json and ends rank 0 with status
    1, while a rank's stop on a signal (143, every rank stopping) leaves rank 0 its grace time to
    write its own record, then Lightning's ending follows, no death recorded."""
    done = subprocess.run(
        [sys.executable, "-c", _OBSERVED, str(tmp_path), str(status)], capture_output=True, text=True, timeout=120
    )
    assert "not ended" not in done.stdout
    failed = tmp_path / "failed.json"
    if status == 3:
        assert done.returncode == 1, done.stderr[-2000:]
        error = json.loads(failed.read_text())["error"]
        assert "rank 1 (pid " in error and "exited with status 3" in error, error
        assert done.stderr.count("zoo-train: error: rank 1 (pid ") == 1
    else:
        assert done.returncode == -9, done.stderr[-2000:]  # Lightning's SIGKILL, after the grace time
        assert not failed.exists()
