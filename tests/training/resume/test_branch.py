"""Branched WSD cooldowns (`branch_from`): a cooldown of M steps branched from a stable run's
checkpoint at step N ends with the weights, bit for bit, of a run configured from the start to
cool down at N over M steps; a sweep over the length gives one ordinary run directory each, whose
record names the parent run and step; a branch that would not be that run is refused on one line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import model_state

# 10 verses: 2 batches of 4 a step; dropout on, so the random streams count too
SMALL = [
    "data.max_examples=10",
    "model.dropout=0.1",
    "trainer.val_check_interval=null",
    "trainer.check_val_every_n_epoch=1",
    "callbacks.checkpoint_every_n_steps=5",
    "scheduler=wsd",
    "scheduler.warmup_steps=2",
]
N = 10


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    """A stable run (a WSD run that never cools down) stopped at step N."""
    run = tmp_path_factory.mktemp("parent") / "stable"
    result = zoo_train(*tiny_overrides(run), *SMALL, f"trainer.max_steps={N}", "scheduler.decay_steps=0")
    assert result.returncode == 0, result.stderr[-3000:]
    return run


@pytest.mark.slow
def test_a_branched_cooldown_is_the_run_configured_to_cool_down_there(tmp_path, parent, cli_here):
    ckpt = parent / "checkpoints" / "last.ckpt"
    straight, branch = tmp_path / "straight", tmp_path / "branch"
    result = cli_here(
        "train",
        *tiny_overrides(straight),
        *SMALL,
        f"trainer.max_steps={N + 4}",
        "scheduler.decay_steps=4",
        "scheduler.decay_shape=one_minus_sqrt",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    result = cli_here(
        "train",
        *tiny_overrides(branch),
        *SMALL,
        f"branch_from={ckpt}",
        "trainer.max_steps=${zoo.branch_end:}",
        "scheduler.decay_steps=4",
        "scheduler.decay_shape=one_minus_sqrt",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(branch / "checkpoints" / "last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a), "the branch differs from the run that cooled down at its step"
    summary = json.loads((branch / "summary.json").read_text())
    assert summary["global_step"] == N + 4
    assert summary["branched_from"] == {"run": str(parent.resolve()), "checkpoint": str(ckpt), "step": N}
    assert not (parent / "summary.json").read_text().count("branched_from")
    # the parent's own files are left as they were: the branch wrote only in its own directory
    assert (
        model_state(ckpt).keys() == a.keys() and json.loads((parent / "summary.json").read_text())["global_step"] == N
    )


@pytest.mark.slow
def test_a_sweep_over_cooldown_lengths_gives_one_run_each_that_zoo_compare_reads(tmp_path, parent):
    ckpt = parent / "checkpoints" / "last.ckpt"
    result = zoo_train(
        "-m",
        *tiny_overrides(),
        *SMALL,
        f"branch_from={ckpt}",
        "trainer.max_steps=${zoo.branch_end:}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "scheduler.decay_steps=2,4",
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    runs = sorted(p.parent for p in (tmp_path / "sweep").glob("*/summary.json"))
    steps = sorted(json.loads((r / "summary.json").read_text())["global_step"] for r in runs)
    assert steps == [N + 2, N + 4]
    compare = subprocess.run(
        [sys.executable, "-m", "zoo.cli.compare", *map(str, runs), f"out={tmp_path / 'cmp'}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compare.returncode == 0, compare.stderr[-3000:]
    with open(tmp_path / "cmp" / "report.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["scheduler.decay_steps"] for r in rows) == ["2", "4"]  # an arm per branch
    assert all(r["status"] == "1 finished" for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["scheduler.decay_steps=4", f"trainer.max_steps={N + 5}"],
            f"cools down until step {N + 4}: set trainer.max_steps={N + 4}",
        ),
        (
            ["scheduler.decay_steps=4", "trainer.max_steps=${zoo.branch_end:}", "model.d_ff=48"],
            "was trained with another config: model.d_ff",
        ),
        (
            ["scheduler.decay_steps=4", "trainer.max_steps=${zoo.branch_end:}", "scheduler.warmup_steps=3"],
            "the warmups differ",
        ),
    ],
)
def test_a_branch_that_would_not_be_that_run_is_refused_on_one_line(tmp_path, parent, cli_here, extra, message):
    result = cli_here(
        "train", *tiny_overrides(tmp_path / "b"), *SMALL, f"branch_from={parent}/checkpoints/last.ckpt", *extra
    )
    assert result.returncode == 2 and message in result.stderr, result.stderr[-3000:]
    assert not (tmp_path / "b" / "checkpoints").exists()


@pytest.mark.slow
def test_a_checkpoint_past_the_parents_stable_phase_is_refused(tmp_path, cli_here):
    """A parent that began its cooldown at step 8 cannot be branched at step 10."""
    run = tmp_path / "cooling"
    result = cli_here("train", *tiny_overrides(run), *SMALL, f"trainer.max_steps={N}", "scheduler.decay_steps=2")
    assert result.returncode == 0, result.stderr[-3000:]
    result = cli_here(
        "train",
        *tiny_overrides(tmp_path / "b"),
        *SMALL,
        f"branch_from={run}/checkpoints/last.ckpt",
        "trainer.max_steps=${zoo.branch_end:}",
        "scheduler.decay_steps=4",
    )
    assert result.returncode == 2 and "past the parent's stable phase" in result.stderr, result.stderr[-3000:]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["scheduler=cosine"], "branch_from branches a cooldown off a stable phase: it needs scheduler=wsd"),
        (["scheduler=wsd"], "it needs scheduler=wsd and scheduler.decay_steps"),
        (["scheduler=wsd", "scheduler.decay_steps=4", "ckpt_path=last"], "cannot be combined with ckpt_path"),
    ],
)
def test_branch_from_without_a_cooldown_to_branch_is_refused_before_anything_runs(tmp_path, cli_here, extra, message):
    result = cli_here("train", *tiny_overrides(tmp_path / "b"), "branch_from=x/checkpoints/last.ckpt", *extra)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-3000:]


def _parent_copy(parent: Path, target: Path) -> Path:
    import shutil

    shutil.copytree(parent, target)
    return target


@pytest.mark.slow
def test_branch_from_naming_a_run_directory_reads_that_runs_config_yaml(tmp_path, parent, cli_here):
    """branch_from=RUN read RUN/../../config.yaml (the run's grandparent's), a file outside the
    run: here one that would be refused, so the branch is only started if the run's own is read."""
    run = _parent_copy(parent, tmp_path / "a" / "b" / "run")
    (tmp_path / "a" / "config.yaml").write_text("x: &a [1]\ny: [*a, *a]\n")
    branch = tmp_path / "branch"
    result = cli_here(
        "train",
        *tiny_overrides(branch),
        *SMALL,
        f"branch_from={run}",
        "trainer.max_steps=${zoo.branch_end:}",
        "scheduler.decay_steps=2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((branch / "summary.json").read_text())
    assert summary["branched_from"]["run"] == str(run) and summary["global_step"] == N + 2


@pytest.mark.slow
def test_a_parent_config_yaml_that_is_a_link_out_or_a_pipe_is_refused(tmp_path, parent, cli_here):
    import os
    import threading

    run = _parent_copy(parent, tmp_path / "run")
    outside = tmp_path / "outside.yaml"
    (run / "config.yaml").rename(outside)
    (run / "config.yaml").symlink_to(outside)
    command = [
        *tiny_overrides(tmp_path / "b"),
        *SMALL,
        f"branch_from={run}/checkpoints/last.ckpt",
        "trainer.max_steps=${zoo.branch_end:}",
        "scheduler.decay_steps=2",
    ]
    for made, words in (
        (lambda: None, f"{run}/config.yaml is a link out of {run}"),
        (lambda: ((run / "config.yaml").unlink(), os.mkfifo(run / "config.yaml")), "is not a regular file"),
    ):
        made()
        # a read that blocks on the pipe ends (empty) after 30 s: the test fails instead of hanging
        timer = threading.Timer(30, lambda: os.close(os.open(run / "config.yaml", os.O_WRONLY | os.O_NONBLOCK)))
        timer.start()
        try:
            result = cli_here("train", *command)
        finally:
            timer.cancel()
        assert result.returncode == 2, result.stderr[-3000:]
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.stderr, lines
        assert not (tmp_path / "b" / "checkpoints").exists()
