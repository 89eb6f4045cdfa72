"""The slow tier of the axis contract: every kind of every axis, the run-level ones (optimizer,
schedule, task, tokenizer) included, trains a few steps with zoo-train, is killed right after a
checkpoint (in a process forked from the test's: tests/forked.py), and resumes to the weights of
a run never stopped, bit for bit; or zoo-train refuses
the kind with these tiny settings on one line naming it or the data it needs (a Hugging Face
tokenizer needs its directory, a classifier labelled examples). The model family axis is left out: a family trains its own task, which the task axis
(each task with a family that trains it) and tests/cli/test_train_cli.py cover."""

from __future__ import annotations

import json

import pytest
import torch

from tests.cli.conftest import tiny_overrides
from tests.contract.conftest import AXES, pair_id
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
SUBSET = [(a, kind) for a in AXES if a.key != "model.family" for kind in a.kinds]


@pytest.mark.slow
@pytest.mark.parametrize("ax,kind", SUBSET, ids=pair_id)
def test_a_kind_trains_and_resumes_bit_for_bit(ax, kind, tmp_path, cli_here):
    args = [*RUN, *cli_overrides(ax.settings(kind))]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = cli_here("train", *tiny_overrides(straight), *args)
    if done.returncode != 0 and "Traceback" not in done.stderr:  # refused: one line, no traceback
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("zoo-train: error: ") and (kind.value in last or "data." in last), done.stderr[-3000:]
        return
    assert done.returncode == 0, done.stderr[-3000:]
    stopped = fork_tool(
        "train", *tiny_overrides(killed), *args, before=lambda: install(2, "last.ckpt", "on_train_batch_end")
    )
    assert stopped.returncode == -9, stopped.stderr[-3000:]
    again = cli_here("train", *tiny_overrides(killed), *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((killed / "summary.json").read_text())["resumed_at_step"] == 2
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(killed / "checkpoints" / "last.ckpt")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), f"{ax.key}={kind.value}: the resumed weights differ"
