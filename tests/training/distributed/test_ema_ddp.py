"""The average of the weights under DDP (trainer=ddp_cpu, 2 gloo processes): each rank updates its
own copy from the same all-reduced weights, so the average two ranks end with is the one a single
process taking the whole global batch ends with, and the average validated over both ranks'
batches (val_ema/loss, reduced over the ranks) is that process's."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import max_abs_diff
from zoo.config.facts.ema import EMA_STATE, EMA_UPDATES
from zoo.training.checkpoint.files import read_checkpoint

STEPS = [
    "trainer.max_steps=8",
    "trainer.val_check_interval=4",
    "data.global_batch_size=8",
    "callbacks.checkpoint_every_n_steps=4",
    "optim.ema=0.8",
    "optim.ema_eval=both",
]


@pytest.mark.slow
def test_two_ranks_hold_the_average_of_one_rank(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = zoo_train(*tiny_overrides(one), *STEPS)
    assert r1.returncode == 0, r1.stderr[-3000:]
    r2 = zoo_train(*tiny_overrides(two), *STEPS, "trainer=ddp_cpu")
    assert r2.returncode == 0, r2.stderr[-3000:]
    a, b = read_checkpoint(one / "checkpoints" / "last.ckpt"), read_checkpoint(two / "checkpoints" / "last.ckpt")
    assert a[EMA_UPDATES] == b[EMA_UPDATES] == 8
    assert max_abs_diff(a[EMA_STATE], b[EMA_STATE]) <= 1e-5
    s1, s2 = (json.loads((run / "summary.json").read_text()) for run in (one, two))
    assert s2["world_size"] == 2 and s2["replicas_identical"] is True
    assert abs(s1["metrics"]["val_ema/loss"] - s2["metrics"]["val_ema/loss"]) <= 1e-4
    assert s1["metrics"]["val_ema/loss"] != s1["metrics"]["val/loss"]
