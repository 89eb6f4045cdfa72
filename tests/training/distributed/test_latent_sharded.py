"""Multi-head latent attention (model.kv=latent) trained over two gloo CPU processes: FSDP2
(trainer=fsdp_cpu, its latent projections and norms sharded by rows) ends at the weights DDP
(trainer=ddp_cpu) ends at, and both at those of one process with the same global batch."""

from __future__ import annotations

import pytest

from tests.training.distributed.conftest import max_abs_diff, weights_on_each_trainer
from zoo.config.facts.axes import axis, cli_overrides


@pytest.mark.slow
def test_latent_attention_trains_alike_on_one_process_ddp_and_fsdp(tmp_path):
    weights = weights_on_each_trainer(tmp_path, *cli_overrides(axis("model.kv").settings("latent")))
    assert any(".self_attn.kv_b_proj." in name for name in weights["cpu"])  # the latent layer trained
    assert max_abs_diff(weights["ddp_cpu"], weights["cpu"]) <= 1e-5
    assert max_abs_diff(weights["fsdp_cpu"], weights["ddp_cpu"]) <= 1e-5
