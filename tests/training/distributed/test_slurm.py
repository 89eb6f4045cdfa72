"""Against a real SLURM installation (`bash .ci/slurm-up` starts a one-machine cluster from
Debian's slurm-wlm and munge): a two-arm sweep through `hydra/launcher=slurm` where each arm
is a 2-task DDP job, preempted in two ways while training, and the hand-submitted sbatch
template. Skipped where no cluster answers, unless ZOO_REQUIRE_SLURM=1 (CI sets it)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import tiny_overrides
from tests.training.distributed.conftest import wait_for
from zoo.training.checkpoint.files import read_checkpoint

RECIPES = Path(__file__).resolve().parents[3] / "recipes"


def _cluster_problem() -> str | None:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "SLURM is not installed here (bash .ci/slurm-up installs and starts it)"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 20 s"
    states = out.stdout.split()
    if out.returncode != 0 or not any(s.rstrip("*~#") in ("idle", "mixed", "allocated") for s in states):
        return f"no SLURM node is up (sinfo: {out.stdout.strip() or out.stderr.strip()}); run bash .ci/slurm-up"
    return None


@pytest.fixture(scope="module")
def slurm():
    problem = _cluster_problem()
    if problem:
        if os.environ.get("ZOO_REQUIRE_SLURM") == "1":
            pytest.fail(f"ZOO_REQUIRE_SLURM=1 but {problem}")
        pytest.skip(problem)


def _requeue_at(log: Path) -> int | None:
    match = (
        re.search(r"signal SIGUSR2: saving .* at step (\d+) and requeueing", log.read_text()) if log.is_file() else None
    )
    return int(match.group(1)) if match else None


def _stopped_at(log: Path) -> int | None:
    """The step a SIGTERM (what `scontrol requeue` sends) saved and stopped the run at."""
    match = re.search(r"SIGTERM: saving .* at step (\d+) and stopping", log.read_text()) if log.is_file() else None
    return int(match.group(1)) if match else None


def _steps(metrics: Path) -> list[int]:
    with open(metrics, newline="") as f:
        return [int(r["step"]) for r in csv.DictReader(f) if r.get("train/loss")]


@pytest.mark.slow
def test_sweep_of_ddp_jobs_survives_preemption_and_requeue(slurm, tmp_path):
    """Arm 0 gets the time-limit signal (SIGUSR2, as `--signal=USR2@120` sends it): it saves
    last.ckpt at that step and requeues itself. Arm 1 is requeued from outside with
    `scontrol requeue`, whose SIGTERM saves last.ckpt at the next step: it resumes there (or,
    had the signal come outside the training loop, from its last periodic checkpoint). Both
    finish in their own run directory, with the full number of steps."""
    sweep = tmp_path / "sweep"
    overrides = tiny_overrides()
    overrides += [
        "trainer.max_steps=300",
        "trainer.val_check_interval=100",
        "data.global_batch_size=8",
        "callbacks.checkpoint_every_n_steps=40",
        "trainer.log_every_n_steps=1",
    ]
    cmd = [
        sys.executable,
        "-m",
        "zoo.cli.train",
        "-m",
        "hydra/launcher=slurm",
        "trainer=ddp_cpu",
        *overrides,
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
    ]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        last = [sweep / str(arm) / "checkpoints" / "last.ckpt" for arm in (0, 1)]
        wait_for(lambda: all(p.is_file() for p in last), 240, "both arms' first checkpoint", proc)
        jobs = sorted(p.name for p in (sweep / ".submitit").iterdir() if re.fullmatch(r"\d+_\d", p.name))
        assert len(jobs) == 2, jobs
        subprocess.run(["scancel", "--signal=USR2", jobs[0]], check=True)
        subprocess.run(["scontrol", "requeue", jobs[1]], check=True)
        out, _ = proc.communicate(timeout=420)
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", "--name=zoo-train"], check=False)
    assert proc.returncode == 0, out[-4000:]
    assert sorted(p.name for p in sweep.iterdir() if not p.name.startswith(".")) == ["0", "1", "multirun.yaml"]

    for arm in (0, 1):
        run = sweep / str(arm)
        summary = json.loads((run / "summary.json").read_text())
        assert summary["status"] == "finished"
        assert summary["global_step"] == 300
        assert summary["world_size"] == 2 and summary["replicas_identical"] is True
        assert summary["resumed_from"] == str(run / "checkpoints" / "last.ckpt"), summary["resumed_from"]
        assert 0 < summary["resumed_at_step"] < 300
        steps = _steps(run / "metrics.csv")
        assert steps == sorted(set(steps)) and steps[-1] == 299  # no step logged twice, none lost
        assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == 300

    signalled = _requeue_at(sweep / "0" / "train.log")
    assert signalled is not None, "arm 0 did not save on SIGUSR2"
    assert json.loads((sweep / "0" / "summary.json").read_text())["resumed_at_step"] == signalled
    assert "requeued SLURM job" in (sweep / "0" / "train.log").read_text()
    arm1 = json.loads((sweep / "1" / "summary.json").read_text())
    stopped = _stopped_at(sweep / "1" / "train.log")
    if stopped is not None:  # SIGTERM inside the training loop: saved at the step it came
        assert arm1["resumed_at_step"] == stopped
    else:  # outside it: the last periodic checkpoint
        assert arm1["resumed_at_step"] % 40 == 0
    assert not (sweep / "1" / "failed.json").exists()  # the stop's record went when the run finished

    # zoo-compare reads a SLURM sweep as it reads a local one: one arm, both (requeued) seeds
    from zoo.compare import compare

    report = compare([sweep], tmp_path / "report")
    (arm,) = report.arms
    assert arm.status == "2 finished" and len(arm.finals("val/loss")) == 2
    # both seeds validated after steps 100, 200 and 300 (a preempted run also validates when it stops)
    shared = set.intersection(*(set(tokens for tokens, _ in r.curve) for r in arm.runs))
    assert sorted(shared) == [100 * 256, 200 * 256, 300 * 256]  # 8 sequences x 32 tokens per step
    assert (tmp_path / "report" / "curves.png").is_file()


@pytest.mark.slow
def test_sbatch_template_runs_a_two_task_job(slurm, tmp_path):
    overrides = tiny_overrides()
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(RECIPES / "zoo.sbatch"), *overrides],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    log = tmp_path / f"slurm-{job}.out"
    # the job's end, asked every half second (`sbatch --wait` asks at growing intervals, up to
    # about half a minute after a job of this size has ended)
    state: dict[str, str] = {}
    deadline = time.monotonic() + 300
    while state.get("JobState") in (None, "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
        assert time.monotonic() < deadline, f"SLURM job {job} did not end in 300 s: {state}"
        time.sleep(0.5)
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=20)
        state.update(re.findall(r"(JobState|ExitCode)=(\S+)", shown.stdout))
    assert state == {"JobState": "COMPLETED", "ExitCode": "0:0"}, (state, log.read_text() if log.is_file() else "")
    run = tmp_path / "runs" / f"slurm-{job}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["replicas_identical"] is True
    assert (run / "train.rank1.log").is_file()
    assert "run directory:" in log.read_text()
