"""model.parametrization=mup under FSDP (trainer=fsdp_cpu: two gloo processes): the optimizer,
built after sharding, gives the sharded hidden matrices μP's learning rate, so the run ends
with the weights DDP (groups built on whole parameters) ends with."""

from __future__ import annotations

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import max_abs_diff, model_state
from zoo.training.checkpoint.files import read_checkpoint

# d_model 32 (tiny_overrides) over a base of 16: m = 2
MUP = [
    "model.parametrization=mup",
    "model.mup_base_d_model=16",
    "optim.lr=1e-3",
    "data.max_examples=20",
    "data.global_batch_size=8",
    "trainer.max_steps=6",
    "scheduler.total_steps=6",
]


@pytest.mark.slow
def test_fsdp_trains_a_mup_model_to_the_weights_ddp_trains_it_to(tmp_path):
    runs = {}
    for trainer in ("fsdp_cpu", "ddp_cpu"):
        run = tmp_path / trainer
        result = zoo_train(*tiny_overrides(run), *MUP, f"trainer={trainer}")
        assert result.returncode == 0, result.stderr[-3000:]
        runs[trainer] = run / "checkpoints" / "last.ckpt"
    diff = max_abs_diff(model_state(runs["fsdp_cpu"]), model_state(runs["ddp_cpu"]))
    assert diff <= 1e-5, diff
    # μP's groups: no decay (embeddings, biases, norms), then the hidden matrices (every decayed
    # matrix of a decoder) at optim.lr / m with weight decay x m
    groups = read_checkpoint(runs["ddp_cpu"])["optimizer_states"][0]["param_groups"]
    assert [g["initial_lr"] for g in groups] == pytest.approx([1e-3, 1e-3 / 2])
    assert [g["weight_decay"] for g in groups] == pytest.approx([0.0, 0.2])
