"""Auxiliary-loss-free balancing (model.moe_balance=bias) across processes: every rank counts the
loads of its own tokens, and the counts are summed over the ranks before each bias update, so two
gloo processes under DDP and under FSDP2 end with the biases one process gets from the same
global batch, and the same on every rank; in one process, micro-batches count like ranks."""

from __future__ import annotations

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import model_state

RATE = 0.01
RUN = [
    "model.ffn=moe",
    "model.moe_experts=8",
    "model.moe_top_k=2",
    "model.moe_gate=sigmoid",
    "model.moe_balance=bias",
    f"model.moe_bias_rate={RATE}",
    "model.bias=false",
    "model.n_layers=2",
    "trainer.max_steps=4",
    "trainer.val_check_interval=4",
    "data.global_batch_size=8",
    "callbacks.checkpoint_every_n_steps=4",
]


def _biases(run) -> dict[str, torch.Tensor]:
    state = model_state(run / "checkpoints" / "last.ckpt")
    return {k: v for k, v in state.items() if k.endswith("router.score_bias")}


@pytest.mark.slow
def test_two_ranks_update_the_biases_one_rank_does_with_the_same_global_batch(tmp_path):
    runs = {
        "one": [],
        "ddp": ["trainer=ddp_cpu"],
        "fsdp": ["trainer=fsdp_cpu"],
        "accumulated": ["data.max_device_batch_size=4"],
    }
    for name, extra in runs.items():
        done = zoo_train(*tiny_overrides(tmp_path / name), *RUN, *extra)
        assert done.returncode == 0, done.stderr[-3000:]
    one = _biases(tmp_path / "one")
    assert len(one) == 2
    for bias in one.values():  # four updates of ±RATE or 0 each, and some moved
        steps = bias / RATE
        assert torch.allclose(steps, steps.round(), atol=1e-4) and steps.abs().max() <= 4
    assert any(bias.abs().sum() > 0 for bias in one.values())
    for name in ("ddp", "fsdp", "accumulated"):
        theirs = _biases(tmp_path / name)
        assert theirs.keys() == one.keys()
        assert all(torch.equal(theirs[k], one[k]) for k in one), name
