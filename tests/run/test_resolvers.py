"""Ranks and run times from the launcher's environment; the checkpoint plumbing of a run."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from zoo.run import resolvers as launch
from zoo.run.rank import launch_rank
from zoo.training.resume import rng


@pytest.fixture
def clean_env(monkeypatch):
    for var in (
        "RANK",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "LOCAL_RANK",
        "NODE_RANK",
        "LOCAL_WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "SLURM_JOB_START_TIME",
        "SLURM_STEP_ID",
        "TORCHELASTIC_USE_AGENT_STORE",
        launch.RUN_TIME_ENV,
    ):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "env, rank",
    [
        ({}, 0),
        ({"RANK": "3"}, 3),  # torchrun
        ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, 1),  # srun
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, 0),
        ({"LOCAL_RANK": "1"}, 1),  # Lightning's launcher
    ],
)
def test_launch_rank(clean_env, env, rank):
    for k, v in env.items():
        clean_env.setenv(k, v)
    assert launch_rank() == rank


def test_log_file_and_hydra_files_per_rank(clean_env):
    launch.register_resolvers()
    cfg = OmegaConf.create({"log": "${zoo.rank_log:train}", "sub": "${zoo.rank_zero:.hydra}"})
    assert (cfg.log, cfg.sub) == ("train.log", ".hydra")
    clean_env.setenv("RANK", "2")
    cfg = OmegaConf.create({"log": "${zoo.rank_log:train}", "sub": "${zoo.rank_zero:.hydra}"})
    assert (cfg.log, cfg.sub) == ("train.rank2.log", None)


def test_run_time_is_fixed_once_and_shared(clean_env):
    launch.register_resolvers()
    clean_env.setenv(launch.RUN_TIME_ENV, "2031-02-03T04:05:06")
    cfg = OmegaConf.create({"dir": "runs/${zoo.now:%Y-%m-%d}/${zoo.now:%H-%M-%S}"})
    assert cfg.dir == "runs/2031-02-03/04-05-06"
    assert launch.agree_run_time() == "2031-02-03T04:05:06"


@pytest.mark.parametrize("step", [0, 2])
def test_the_tasks_of_a_slurm_job_step_share_its_start(clean_env, step):
    """All tasks of step S agree on the job's start + S seconds (later steps of the same job
    get directories of their own)."""
    from datetime import datetime

    clean_env.setenv("SLURM_JOB_START_TIME", "1700000000")
    clean_env.setenv("SLURM_NTASKS", "2")
    clean_env.setenv("SLURM_STEP_ID", str(step))
    assert launch.agree_run_time() == datetime.fromtimestamp(1700000000 + step).isoformat()


@pytest.mark.slow  # starts a Python process that imports zoo
def test_zoo_train_puts_the_run_in_the_agreed_directory(clean_env):
    """Through the real CLI: Hydra re-registers its own ${now:} at start-up, so only a
    resolver of zoo's own can carry the agreed time into hydra.run.dir."""
    import subprocess
    import sys

    env = dict(os.environ, ZOO_RUN_TIME="2031-02-03T04:05:06")
    out = subprocess.run(
        [sys.executable, "-m", "zoo.cli.train", "--cfg", "hydra", "--resolve", "-p", "hydra.run.dir"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.stdout.strip().splitlines()[-1] == "runs/2031-02-03/04-05-06", out.stdout + out.stderr


def test_torchrun_ranks_agree_through_the_agent_store(clean_env):
    """Two 'ranks' with different clocks ask the same store: both get the first one's time."""
    from datetime import timedelta

    from tests.training.distributed.conftest import free_port

    port = free_port()
    server = torch.distributed.TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=30))
    for k, v in {
        "TORCHELASTIC_RUN_ID": "x",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "WORLD_SIZE": "2",
        "TORCHELASTIC_USE_AGENT_STORE": "True",
    }.items():
        clean_env.setenv(k, v)
    assert launch._from_torchrun_store("2030-01-01T00:00:00") == "2030-01-01T00:00:00"
    assert launch._from_torchrun_store("2030-01-01T00:00:09") == "2030-01-01T00:00:00"
    del server


def test_rng_states_round_trip():
    saved = rng.capture()
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.rand(5), random.random(), np.random.rand()  # move on
    # the saved state is plain data: it survives torch.save / weights_only loading
    import io

    buf = io.BytesIO()
    torch.save(saved, buf)
    buf.seek(0)
    rng.restore(torch.load(buf, weights_only=True))
    again = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(expected[0], again[0]) and expected[1:] == again[1:]
