"""A run directory belongs to one run: two commands started in the same second with the default
directory get one each; a command on a directory a live run owns is refused on one line and
leaves it alone; a directory whose run was killed is taken over, and the run resumes there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.cli.conftest import tiny_overrides
from tests.forked import Forked
from tests.training.distributed.conftest import wait_for


def _seed(run) -> int:
    line = next(line for line in (run / "config.yaml").read_text().splitlines() if line.startswith("seed:"))
    return int(line.split()[1])


@pytest.mark.slow
def test_two_commands_in_the_same_second_get_a_directory_each(tmp_path):
    """The default runs/DATE/TIME of every second of the next minute is taken already (an earlier
    run's directory): both commands run in a runs/DATE/TIME-N of their own, whether or not they
    start in the same second, and the earlier directories are left alone."""
    from datetime import datetime, timedelta

    start = datetime.now()
    taken = []
    for s in range(60):
        moment = start + timedelta(seconds=s)
        d = tmp_path / "runs" / moment.strftime("%Y-%m-%d") / moment.strftime("%H-%M-%S")
        d.mkdir(parents=True, exist_ok=True)
        (d / "summary.json").write_text("{}")  # a finished run's record
        taken.append(d)
    cmds = [[*tiny_overrides(), "trainer.max_steps=20", f"seed={s}"] for s in (1, 2)]
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_TIME"}  # two fresh commands, as from a shell
    procs = [Forked("train", *c, cwd=tmp_path, env=env) for c in cmds]  # two processes (tests/forked.py)
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    runs = sorted(p for p in (tmp_path / "runs").glob("*/*") if p.is_dir() and p not in taken)
    assert len(runs) == 2 and all("-" in r.name[len("00-00-00") :] for r in runs), runs
    assert all((d / "summary.json").read_text() == "{}" for d in taken)
    assert sorted(_seed(r) for r in runs) == [1, 2]  # each directory holds its own command's run
    for r in runs:
        assert json.loads((r / "summary.json").read_text())["global_step"] == 20
        assert not (r / ".zoo-lock").exists()  # given back at the end


@pytest.mark.slow
def test_a_live_run_keeps_its_directory_and_a_dead_one_is_taken_over(tmp_path, zoo_train_here):
    """The owner is a process of its own (alive, then SIGKILLed); the second command and the
    takeover are zoo-train's main() in this process, another process than the owner's, so the
    lock is another process's either way (and the owner trains flat out for less time)."""
    run = tmp_path / "run"
    args = [
        *tiny_overrides(run),
        "trainer.val_check_interval=1000",
        "callbacks.checkpoint_every_n_steps=5",
        "scheduler.total_steps=100000",
    ]
    owner = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli.train", *args, "trainer.max_steps=100000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for((run / "checkpoints" / "last.ckpt").is_file, 180, "the first run to train", owner)
        config = (run / "config.yaml").read_bytes()
        second = zoo_train_here(*tiny_overrides(run), "seed=1")
        assert second.returncode == 2, second.stderr[-2000:]
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "in use by a running zoo-train" in lines[0] and str(owner.pid) in lines[0]
        assert (run / "config.yaml").read_bytes() == config and not (run / "failed.json").exists()
        assert owner.poll() is None  # the owner trains on
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert json.loads((run / ".zoo-lock").read_text())["pid"] == owner.pid  # left behind by the kill
    from zoo.training.checkpoint.files import read_checkpoint

    at_kill = read_checkpoint(run / "checkpoints" / "last.ckpt", weights=False)["global_step"]
    # the run again, to a nearer end: its owner is gone, so it takes the directory over and resumes
    again = zoo_train_here(*args, f"trainer.max_steps={at_kill + 10}")
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_at_step"] == at_kill and summary["global_step"] == at_kill + 10
    assert not (run / ".zoo-lock").exists()
