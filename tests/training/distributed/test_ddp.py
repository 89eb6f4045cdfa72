"""Real multi-process data parallelism on CPU (gloo): Lightning's own launcher and torchrun
with two "nodes" on localhost. Results must not depend on how many processes ran them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import free_port, max_abs_diff, model_state

STEPS = [
    "trainer.max_steps=8",
    "trainer.val_check_interval=4",
    "data.global_batch_size=8",
    "callbacks.checkpoint_every_n_steps=4",
]


def _summary(run) -> dict:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.slow
def test_two_ranks_match_one_rank_with_the_same_global_batch(tmp_path):
    """trainer=ddp_cpu (2 gloo processes, 4 examples each) ends with the weights of one
    process taking all 8 examples per step, and both replicas hold the same weights."""
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = zoo_train(*tiny_overrides(one), *STEPS)
    assert r1.returncode == 0, r1.stderr[-3000:]
    r2 = zoo_train(*tiny_overrides(two), *STEPS, "trainer=ddp_cpu")
    assert r2.returncode == 0, r2.stderr[-3000:]

    s1, s2 = _summary(one), _summary(two)
    assert (s1["world_size"], s2["world_size"]) == (1, 2)
    assert s2["replicas_identical"] is True and s2["replica_max_fingerprint_diff"] == 0.0
    assert s1["tokens_seen"] == s2["tokens_seen"] == 8 * 8 * 32
    diff = max_abs_diff(model_state(one / "checkpoints" / "last.ckpt"), model_state(two / "checkpoints" / "last.ckpt"))
    assert diff <= 1e-5, diff
    assert abs(s1["metrics"]["val/loss"] - s2["metrics"]["val/loss"]) <= 1e-4

    # one run directory; every rank's log kept there; files of the run written once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]
    assert (two / "train.log").is_file() and (two / "train.rank1.log").is_file()
    assert "GLOBAL_RANK: 1" in (two / "train.rank1.log").read_text()
    assert sum(line.startswith("run directory:") for line in r2.stdout.splitlines()) == 1


@pytest.mark.slow  # starts a Python process that imports zoo
def test_global_batch_must_split_over_the_devices(tmp_path):
    result = zoo_train(*tiny_overrides(tmp_path / "r"), *STEPS, "trainer=ddp_cpu", "trainer.devices=3")
    assert result.returncode == 2
    assert "data.global_batch_size (8) must be divisible by the number of devices (3)" in result.stderr
    assert "Traceback" not in result.stderr


def _torchrun(
    node_rank: int,
    port: int,
    cwd,
    *overrides: str,
    prefix: tuple[str, ...] = (),
    out=subprocess.PIPE,
    new_session: bool = False,
) -> subprocess.Popen:
    cmd = [
        *prefix,
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=1",
        f"--node-rank={node_rank}",
        "--master-addr=127.0.0.1",
        f"--master-port={port}",
        "-m",
        "zoo.cli.train",
        *overrides,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", ZOO_CACHE=str(cwd / "cache"))
    return subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=new_session
    )


OTHER_HOST = "zoo-other-host"


def _other_host_prefix() -> tuple[str, ...] | None:
    """A command prefix that runs a program under another host name (a UTS namespace), so that a
    second torchrun "node" on this machine is another host to zoo; None where that is not allowed."""
    for unshare in (("unshare", "--uts"), ("unshare", "--user", "--map-root-user", "--uts")):
        prefix = (*unshare, "sh", "-c", f'hostname {OTHER_HOST} && exec "$@"', "sh")
        try:
            probe = subprocess.run([*prefix, "hostname"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.strip() == OTHER_HOST:
            return prefix
    return None


def _tree(pid: int) -> list[int]:
    """`pid` and every process under it."""
    from tests.training.distributed.conftest import children

    out = [pid]
    for child in children(pid):
        out += _tree(child)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("end", ["killed", "frozen"])
def test_a_rank_on_another_host_that_dies_or_freezes_ends_the_job_named_within_60_s(tmp_path, end):
    """Two torchrun "nodes", the second under another host name, so rank 1 cannot be watched by
    its process from rank 0's host: SIGKILL node 1 whole (agent and rank: a machine lost), or
    SIGSTOP it (a machine that hangs; no socket closes, so no collective fails). Rank 0 sees rank
    1's heartbeat stop, writes failed.json naming it, and its node exits non-zero within 60 s
    (here with callbacks.rank_silence_s=10, within 30 s)."""
    prefix = _other_host_prefix()
    if prefix is None:
        pytest.skip("needs `unshare --uts` (a second host name on this machine) to stand for another node")
    import signal

    from tests.training.distributed.conftest import wait_for

    run = tmp_path / "run"
    overrides = [
        *tiny_overrides(run),
        "trainer.max_steps=100000",
        "trainer.val_check_interval=1000",
        "callbacks.checkpoint_every_n_steps=5",
        "trainer.num_nodes=2",
        "trainer.strategy=ddp",
        "callbacks.rank_silence_s=10",  # the least it takes (30 s by default): the test's wait
    ]
    port = free_port()
    with open(tmp_path / "node0.log", "w") as log0, open(tmp_path / "node1.log", "w") as log1:
        node0 = _torchrun(0, port, tmp_path, *overrides, out=log0)
        node1 = _torchrun(1, port, tmp_path, *overrides, prefix=prefix, out=log1, new_session=True)
        try:
            wait_for(lambda: (run / "checkpoints" / "last.ckpt").is_file(), 240, "training to start", node0)
            beacon = json.loads((run / ".ranks" / "1").read_text())
            assert beacon["host"] == OTHER_HOST and beacon["local_rank"] == 0
            tree = _tree(node1.pid)  # the agent, and the rank it started in a session of its own
            assert beacon["pid"] in tree
            start = time.monotonic()
            for pid in tree:
                os.kill(pid, signal.SIGKILL if end == "killed" else signal.SIGSTOP)
            node0.wait(timeout=120)
            elapsed = time.monotonic() - start
        finally:
            for pid in _tree(node1.pid) + _tree(node0.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            node0.wait()
            node1.wait()
    out0 = (tmp_path / "node0.log").read_text()
    assert node0.returncode != 0, out0[-3000:]
    failed = json.loads((run / "failed.json").read_text())
    assert failed["error"].startswith(
        f"rank 1 (host {OTHER_HOST}, pid {beacon['pid']}) stopped answering: no heartbeat for "
    ), failed
    assert "Rerun the same command to resume from" in failed["error"]
    assert (run / "checkpoints" / "last.ckpt").is_file()  # what was saved is kept
    silent = float(failed["error"].split("no heartbeat for ")[1].split(" s")[0])
    assert 10 <= silent < 30, failed  # the setting's silence, not the default's 30 s
    assert elapsed < 40, elapsed


@pytest.mark.slow
def test_torchrun_two_nodes_on_localhost_share_one_run_directory(tmp_path):
    """`torchrun --nnodes=2 --nproc-per-node=1` twice (node ranks 0 and 1), the second node
    started two seconds later: both ranks still agree on one `runs/DATE/TIME` directory (the
    default `${zoo.now:}` one, not given on the command line) and train as one job."""
    overrides = tiny_overrides()
    overrides += [*STEPS, "trainer.num_nodes=2", "trainer.strategy=ddp"]
    port = free_port()
    node0 = _torchrun(0, port, tmp_path, *overrides)
    time.sleep(2.0)
    node1 = _torchrun(1, port, tmp_path, *overrides)
    out1, _ = node1.communicate(timeout=300)
    out0, _ = node0.communicate(timeout=300)
    assert node0.returncode == 0, out0[-3000:]
    assert node1.returncode == 0, out1[-3000:]

    runs = [p for p in (tmp_path / "runs").glob("*/*") if p.is_dir()]
    assert len(runs) == 1, runs
    run = runs[0]
    summary = _summary(run)
    assert summary["world_size"] == 2 and summary["replicas_identical"] is True
    assert summary["tokens_seen"] == 8 * 8 * 32
    assert (run / "train.rank1.log").is_file()
    assert "run directory:" in out0 and "run directory:" not in out1  # rank 0 reports

    # the ranks started together: one prepared the token shards, the other waited and mapped them
    (entry,) = (tmp_path / "cache" / "prepared").glob("*/index.json")
    logs = [(run / name).read_text() for name in ("train.log", "train.rank1.log")]
    found = [
        line.split("prepared data: ")[1] for text in logs for line in text.splitlines() if "prepared data: " in line
    ]
    assert len(found) == 2 and all(f.startswith(f"{entry.parent} (") for f in found), found
    assert sorted("built by this process" in f for f in found) == [False, True]
    assert summary["prepared_data"] == str(entry.parent)


@pytest.mark.parametrize("launcher", ["lightning", "torchrun"])
@pytest.mark.slow
def test_a_crashed_rank_ends_the_whole_job_quickly(tmp_path, launcher):
    """SIGKILL one rank mid-training: the job exits non-zero within 60 s instead of the survivor
    waiting in a collective, and failed.json names the rank, whichever launcher started it."""
    from tests.training.distributed.conftest import children, kill, wait_for

    run = tmp_path / "run"
    long_run = [
        *tiny_overrides(run),
        "trainer.max_steps=100000",
        "trainer.val_check_interval=1000",
        "callbacks.checkpoint_every_n_steps=5",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if launcher == "lightning":
        cmd = [sys.executable, "-m", "zoo.cli.train", *long_run, "trainer=ddp_cpu"]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            "-m",
            "zoo.cli.train",
            *long_run,
            "trainer.devices=2",
            "trainer.strategy=ddp",
        ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (run / "checkpoints" / "last.ckpt").is_file(), 180, "training to start", proc)
        if launcher == "lightning":  # rank 1 is the child the launcher started
            victims = children(proc.pid)
        else:  # torchrun's agent started both ranks; kill rank 1
            victims = [
                pid
                for pid in children(proc.pid)
                if "RANK=1" in open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace").split("\0")
            ]
        assert victims, "no rank-1 process found"
        start = time.monotonic()
        for pid in victims:
            kill(pid)
        proc.wait(timeout=120)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in children(proc.pid):
            kill(pid)
    assert proc.returncode != 0
    assert elapsed < 120
    assert (run / "checkpoints" / "last.ckpt").is_file()  # what was saved is kept
    failed = json.loads((run / "failed.json").read_text())
    if launcher == "lightning":  # rank 0 saw its child die: the record names it and how
        assert "rank 1" in failed["error"] and "SIGKILL" in failed["error"], failed
    else:  # rank 0 saw its sibling's beacon outlive the process
        assert "rank 1" in failed["error"] and "ended without a word" in failed["error"], failed
    assert elapsed < 60


@pytest.mark.slow
def test_the_death_of_rank_zero_ends_the_other_ranks_with_a_record(tmp_path):
    """SIGKILL rank 0 (the launcher's parent process): rank 1 used to wait in its next collective
    for gloo's 30-minute timeout. It now sees its parent gone, writes failed.json naming rank 0
    and exits."""
    from tests.training.distributed.conftest import children, kill, wait_for

    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "zoo.cli.train",
        *tiny_overrides(run),
        "trainer.max_steps=100000",
        "trainer.val_check_interval=1000",
        "callbacks.checkpoint_every_n_steps=5",
        "trainer=ddp_cpu",
    ]
    proc = subprocess.Popen(
        cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    ranks = []
    try:
        wait_for(lambda: (run / "checkpoints" / "last.ckpt").is_file(), 180, "training to start", proc)
        ranks = children(proc.pid)
        assert ranks, "no rank-1 process found"
        start = time.monotonic()
        kill(proc.pid)
        proc.wait(timeout=30)
        wait_for(
            lambda: not any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in ranks),
            60,
            "rank 1 to end",
        )
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in ranks:
            kill(pid)
    assert elapsed < 60
    failed = json.loads((run / "failed.json").read_text())
    assert "rank 0" in failed["error"] and "ended without a word" in failed["error"], failed


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.slow
def test_muon_under_two_ranks_keeps_the_replicas_identical_and_follows_one_rank(tmp_path):
    """optim=muon under trainer=ddp_cpu: each rank orthogonalises the same all-reduced gradient of
    each whole matrix, so the replicas stay bit-identical; they follow one process taking the
    whole batch up to the rounding of the gradient's sum (Newton-Schulz runs in bfloat16)."""
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = zoo_train(*tiny_overrides(one), *STEPS, "optim=muon")
    assert r1.returncode == 0, r1.stderr[-3000:]
    r2 = zoo_train(*tiny_overrides(two), *STEPS, "optim=muon", "trainer=ddp_cpu")
    assert r2.returncode == 0, r2.stderr[-3000:]
    s2 = _summary(two)
    assert s2["world_size"] == 2 and s2["replicas_identical"] is True and s2["replica_max_fingerprint_diff"] == 0.0
    diff = max_abs_diff(model_state(one / "checkpoints" / "last.ckpt"), model_state(two / "checkpoints" / "last.ckpt"))
    assert diff <= 1e-3, diff
    assert abs(_summary(one)["metrics"]["val/loss"] - s2["metrics"]["val/loss"]) <= 1e-2
