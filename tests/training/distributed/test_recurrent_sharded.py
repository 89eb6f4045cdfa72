"""A recurrent hybrid (model.attention=gated_deltanet or mamba2, the contract's two layers: one
recurrent, one full) trained over two gloo CPU processes: FSDP2 (trainer=fsdp_cpu, the recurrent
layer's projections, convolution, decays and gated norm sharded by rows) ends at the weights DDP
(trainer=ddp_cpu) ends at, and both at those of one process with the same global batch. Its exact
resume is the axis contract's (tests/contract/test_axes_resume.py)."""

from __future__ import annotations

import pytest

from tests.training.distributed.conftest import max_abs_diff, weights_on_each_trainer
from zoo.config.facts.axes import axis, cli_overrides


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gated_deltanet", "mamba2"])
def test_a_recurrent_hybrid_trains_alike_on_one_process_ddp_and_fsdp(kind, tmp_path):
    weights = weights_on_each_trainer(tmp_path, *cli_overrides(axis("model.attention").settings(kind)))
    assert any(".self_attn.A_log" in name for name in weights["cpu"])  # the recurrent layer trained
    assert max_abs_diff(weights["ddp_cpu"], weights["cpu"]) <= 1e-5
    assert max_abs_diff(weights["fsdp_cpu"], weights["ddp_cpu"]) <= 1e-5
