"""A recurrent hybrid (model.attention=gated_deltanet or mamba2, the contract's two layers: one
recurrent, one full) trained over two gloo CPU processes: FSDP2 (trainer=fsdp_cpu, the recurrent
layer's projections, convolution, decays and gated norm sharded by rows) ends at the weights DDP
(trainer=ddp_cpu) ends at, and both at those of one process with the same global batch. Its exact
resume is the axis contract's (tests/contract/test_axes_resume.py)."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import max_abs_diff, model_state
from zoo.config.facts.axes import axis, cli_overrides

RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "trainer.max_steps=4",
    "scheduler.total_steps=4",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=4",
]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gated_deltanet", "mamba2"])
def test_a_recurrent_hybrid_trains_alike_on_one_process_ddp_and_fsdp(kind, tmp_path):
    weights = {}
    mixer = cli_overrides(axis("model.attention").settings(kind))
    for trainer in ("cpu", "ddp_cpu", "fsdp_cpu"):
        run = tmp_path / trainer
        done = zoo_train(*tiny_overrides(run), *mixer, *RUN, f"trainer={trainer}")
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads((run / "summary.json").read_text())["global_step"] == 4
        ckpt = run / "checkpoints" / ("full.ckpt" if trainer == "fsdp_cpu" else "last.ckpt")
        weights[trainer] = model_state(ckpt)
    assert any(".self_attn.A_log" in name for name in weights["cpu"])  # the recurrent layer trained
    assert max_abs_diff(weights["ddp_cpu"], weights["cpu"]) <= 1e-5
    assert max_abs_diff(weights["fsdp_cpu"], weights["ddp_cpu"]) <= 1e-5
