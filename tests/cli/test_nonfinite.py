"""A loss that becomes NaN or infinite: the run stops naming the step and keeps its last good
checkpoint, or, with task.on_nonfinite_loss=skip, leaves the weights alone for those steps and
counts them. The divergence is real: a learning rate far too large, no gradient clipping."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from tests.cli.conftest import tiny_overrides
from zoo.training.checkpoint.files import read_checkpoint

DIVERGE = [
    "optim.lr=1e4",
    "trainer.gradient_clip_val=null",
    "scheduler=constant",
    "scheduler.warmup_steps=0",
    "trainer.max_steps=40",
    "callbacks.checkpoint_every_n_steps=1",
    "trainer.val_check_interval=40",
]


def _diverging(overrides: list[str]) -> list[str]:
    return [o for o in overrides if not o.startswith("scheduler.warmup_steps")] + DIVERGE


@pytest.mark.slow
def test_nonfinite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(zoo_train_here, tmp_path):
    run = tmp_path / "run"
    result = zoo_train_here(*_diverging(tiny_overrides(run)))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("zoo-train: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    message = errors[0]
    assert message.startswith("zoo-train: error: the training loss is ")
    step = int(message.split(" at step ")[1].split(";")[0])
    kept = read_checkpoint(run / "checkpoints" / "last.ckpt")
    assert f"last.ckpt (step {kept['global_step']})" in message
    assert kept["global_step"] == step  # written after the last step whose loss was finite
    assert all(torch.isfinite(v).all() for v in kept["state_dict"].values() if v.is_floating_point())
    assert not (run / "summary.json").exists()


@pytest.mark.slow
def test_skip_policy_counts_the_skipped_steps_and_finishes(zoo_train_here, tmp_path):
    run = tmp_path / "run"
    result = zoo_train_here(*_diverging(tiny_overrides(run)), "task.on_nonfinite_loss=skip")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    skipped = summary["nonfinite_skipped"]
    assert 0 < skipped < 40
    with open(run / "metrics.csv", newline="") as f:
        logged = [float(r["train/nonfinite_skipped"]) for r in csv.DictReader(f) if r.get("train/nonfinite_skipped")]
    assert logged and logged[-1] == skipped
    state = read_checkpoint(run / "checkpoints" / "last.ckpt")["state_dict"]
    assert int(state["nonfinite_skipped"]) == skipped


def test_unknown_policy_is_refused(zoo_train_here, tmp_path):
    result = zoo_train_here(*tiny_overrides(tmp_path / "r"), "task.on_nonfinite_loss=ignore")
    assert result.returncode == 2
    assert "on_nonfinite_loss" in result.stderr and "skip" in result.stderr


@pytest.mark.slow
def test_skip_with_gradient_accumulation_is_refused(zoo_train_here, tmp_path):
    """Skipping one micro-batch of an accumulated step would apply a partial (under DDP, an
    unsynchronised) gradient: refused before training."""
    result = zoo_train_here(
        *tiny_overrides(tmp_path / "r"),
        "task.on_nonfinite_loss=skip",
        "data.global_batch_size=4",
        "data.max_device_batch_size=2",
    )
    assert result.returncode == 2
    assert "accumulates 2" in result.stderr and "on_nonfinite_loss" in result.stderr


def test_a_nonfinite_gradient_under_a_finite_loss_is_caught():
    """Gradients can overflow while the loss stays finite: the check reads the gradients
    themselves (after DDP's all-reduce, so every rank decides alike) before the optimizer
    step; stop raises naming the parameter, skip drops the step and counts it."""
    import pytest

    from tests.conftest import tiny
    from zoo.tasks import TASKS
    from zoo.tasks.base import NonFiniteLoss

    task = TASKS["causal_lm"](model=tiny(), task={"kind": "causal_lm"})
    optimizer = torch.optim.SGD(task.parameters(), lr=0.1)
    for p in task.parameters():
        p.grad = torch.zeros_like(p)
    first = next(task.named_parameters())
    first[1].grad[0] = float("inf")
    with pytest.raises(NonFiniteLoss, match=f"gradient of {first[0]} is not finite"):
        task.on_before_optimizer_step(optimizer)
    skipping = TASKS["causal_lm"](model=tiny(), task={"kind": "causal_lm", "on_nonfinite_loss": "skip"})
    for p in skipping.parameters():
        p.grad = torch.full_like(p, float("nan"))
    skipping.on_before_optimizer_step(torch.optim.SGD(skipping.parameters(), lr=0.1))
    assert all(p.grad is None for p in skipping.parameters())
    assert int(skipping.nonfinite_skipped) == 1
