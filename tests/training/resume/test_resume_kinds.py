"""Exact resume for the optimizer and schedule kinds whose state or shape is their own: a run of
optim=muon (Muon's momentum buffers beside AdamW's moments) and one of scheduler=wsd stopped mid-way
(the WSD run inside its cooldown) and continued (`ckpt_path=last`) end with the weights of the run
that went straight, bit for bit. Each run is zoo-train's main() in this process."""

from __future__ import annotations

import pytest
import torch

from tests.cli.conftest import tiny_overrides
from tests.training.distributed.conftest import model_state
from zoo.training.checkpoint.files import read_checkpoint

SMALL = [
    "data.max_examples=10",
    "model.dropout=0.1",
    "data.global_batch_size=4",
    "trainer.val_check_interval=null",
    "trainer.check_val_every_n_epoch=1",
    "callbacks.checkpoint_every_n_steps=5",
    "scheduler.total_steps=30",
]
KINDS = {  # kind: (overrides, the step the first leg stops at)
    "muon": (["optim=muon", "model.activation=swiglu"], 7),
    "wsd": (
        [
            "scheduler=wsd",
            "scheduler.warmup_steps=2",
            "scheduler.decay_steps=10",
            "scheduler.decay_shape=one_minus_sqrt",
        ],
        23,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_stopped_and_continued_run_ends_with_the_uninterrupted_weights(tmp_path, kind, cli_here):
    extra, stop = KINDS[kind]
    straight, split = tmp_path / "straight", tmp_path / "split"
    result = cli_here("train", *tiny_overrides(straight), *SMALL, *extra, "trainer.max_steps=30")
    assert result.returncode == 0, result.stderr[-3000:]
    first = cli_here("train", *tiny_overrides(split), *SMALL, *extra, f"trainer.max_steps={stop}")
    assert first.returncode == 0, first.stderr[-3000:]
    saved = read_checkpoint(split / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == stop
    if kind == "muon":  # Muon's buffers are in the checkpoint, beside AdamW's moments
        states = saved["optimizer_states"][0]["state"].values()
        assert any("momentum_buffer" in s for s in states) and any("exp_avg" in s for s in states)
    second = cli_here("train", *tiny_overrides(split), *SMALL, *extra, "trainer.max_steps=30", "ckpt_path=last")
    assert second.returncode == 0, second.stderr[-3000:]
    a = model_state(straight / "checkpoints" / "last.ckpt")
    b = model_state(split / "checkpoints" / "last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a), f"{kind}: resumed weights differ from the uninterrupted run"
