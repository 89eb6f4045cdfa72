"""The slow tier of the axis contract: every kind of every axis, the run-level ones (optimizer,
schedule, task, tokenizer) included, trains a few steps with zoo-train, is killed right after a
checkpoint (in a process forked from the test's: tests/forked.py), and resumes to the weights of
a run never stopped, bit for bit; or zoo-train refuses the kind with these tiny settings on one
line naming it or the data it needs (a Hugging Face tokenizer needs its directory, a classifier
labelled examples). A run-level kind trains alone; the model axes' kinds train together, every
kind in some row of a design that holds each once (tests/covering.py's `each_once`: 11 runs for
the 57 kinds). The model family axis is left out: a family trains its own task, which the task
axis (each task with a family that trains it) and tests/cli/test_train_cli.py cover."""

from __future__ import annotations

import json

import pytest
import torch

from tests.cli.conftest import tiny_overrides
from tests.contract.conftest import AXES, MODEL_AXES, pair_id, row_config, row_id, row_settings
from tests.covering import each_once
from tests.forked import fork_tool
from tests.training.checkpoint.kill_after_save import install
from tests.training.distributed.conftest import model_state
from zoo.config.facts.axes import cli_overrides

RUN = [
    "trainer.max_steps=4",
    "callbacks.checkpoint_every_n_steps=2",
    "trainer.val_check_interval=4",
    "data.max_examples=40",
]
RUN_LEVEL = [(a, kind) for a in AXES if not a.model_level for kind in a.kinds]
MODEL_ROWS, _ = each_once(
    {key: list(a.kinds) for key, a in MODEL_AXES.items() if key != "model.family"},
    lambda row: row_config(row)[0] is not None,
)


@pytest.mark.slow
@pytest.mark.parametrize("ax,kind", RUN_LEVEL, ids=pair_id)
def test_a_run_level_kind_trains_and_resumes_bit_for_bit(ax, kind, tmp_path, cli_here):
    args = [*RUN, *cli_overrides(ax.settings(kind))]
    done = cli_here("train", *tiny_overrides(tmp_path / "straight"), *args)
    if done.returncode != 0 and "Traceback" not in done.stderr:  # refused: one line, no traceback
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("zoo-train: error: ") and (kind.value in last or "data." in last), done.stderr[-3000:]
        return
    assert done.returncode == 0, done.stderr[-3000:]
    _resumes_as_never_stopped(args, tmp_path, cli_here)


@pytest.mark.slow
@pytest.mark.parametrize("row", MODEL_ROWS, ids=row_id)
def test_a_row_of_model_kinds_trains_and_resumes_bit_for_bit(row, tmp_path, cli_here):
    args = [*RUN, *cli_overrides(row_settings(row) or {})]
    done = cli_here("train", *tiny_overrides(tmp_path / "straight"), *args)
    assert done.returncode == 0, done.stderr[-3000:]
    _resumes_as_never_stopped(args, tmp_path, cli_here)


def _resumes_as_never_stopped(args: list[str], tmp_path, cli_here) -> None:
    """The run of `args` killed after its step-2 checkpoint and resumed ends with the weights of
    the one in tmp_path/straight, never stopped."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    stopped = fork_tool(
        "train", *tiny_overrides(killed), *args, before=lambda: install(2, "last.ckpt", "on_train_batch_end")
    )
    assert stopped.returncode == -9, stopped.stderr[-3000:]
    again = cli_here("train", *tiny_overrides(killed), *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((killed / "summary.json").read_text())["resumed_at_step"] == 2
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(killed / "checkpoints" / "last.ckpt")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), f"{args}: the resumed weights differ"
