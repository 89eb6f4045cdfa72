"""The average of the weights under sharding (trainer=fsdp_cpu: FSDP2 over two gloo processes; an
average written by two FSDP ranks continued on HSDP's 2 x 2 mesh is tests/training/distributed/
test_hsdp.py's run): each rank keeps and updates the rows of the average its
parameter shard holds, and a checkpoint holds the average gathered whole. So two sharded ranks end
with the average one process taking the whole batch ends with (float32 rounding), val_ema/loss
reduced over the ranks is that process's, and a run stopped and continued (the whole average cut
into each rank's rows again) ends where the uninterrupted run ends."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import max_abs_diff, ok, summary
from zoo.config.facts.ema import EMA_STATE, EMA_UPDATES
from zoo.training.checkpoint.files import read_checkpoint

RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "model.dropout=0",
    "scheduler.total_steps=4",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "callbacks.checkpoint_every_n_steps=2",
    "trainer.limit_val_batches=1",
    "trainer.precision=32-true",
    "optim.ema=0.8",
    "optim.ema_eval=both",
]
LAST = ("checkpoints", "last.ckpt")


def _average(run: Path) -> dict[str, torch.Tensor]:
    return read_checkpoint(run.joinpath(*LAST))[EMA_STATE]


@pytest.fixture(scope="module")
def one(tmp_path_factory) -> Path:
    """RUN on one process taking the whole batch (shared by the tests below)."""
    run = tmp_path_factory.mktemp("ema") / "one"
    ok(zoo_train(*tiny_overrides(run), *RUN))
    return run


@pytest.mark.slow
def test_two_sharded_ranks_hold_the_average_of_one_process_and_resume_it(one, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    ok(zoo_train(*tiny_overrides(straight), *RUN, "trainer=fsdp_cpu"))
    assert summary(straight)["world_size"] == 2
    ours, theirs = read_checkpoint(straight.joinpath(*LAST)), read_checkpoint(one.joinpath(*LAST))
    assert ours[EMA_UPDATES] == theirs[EMA_UPDATES] == 4
    assert ours[EMA_STATE].keys() == theirs[EMA_STATE].keys()
    assert all(t.shape == theirs[EMA_STATE][k].shape for k, t in ours[EMA_STATE].items())  # whole, not a shard
    assert max_abs_diff(ours[EMA_STATE], theirs[EMA_STATE]) <= 1e-5
    assert summary(straight)["metrics"]["val_ema/loss"] == pytest.approx(
        summary(one)["metrics"]["val_ema/loss"], abs=1e-4
    )
    # stopped after 2 of the 4 steps, then the same command on: the average cut into rows again
    ok(zoo_train(*tiny_overrides(resumed), *RUN, "trainer=fsdp_cpu", "trainer.max_steps=2"))
    ok(zoo_train(*tiny_overrides(resumed), *RUN, "trainer=fsdp_cpu"))
    assert summary(resumed)["resumed_at_step"] == 2
    a, b = _average(straight), _average(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
