"""task.z_loss in training: the loss backward runs is the cross-entropy plus the z-loss, logged
apart (train/z_loss), while train/loss stays the cross-entropy, for every token task."""

from __future__ import annotations

import csv
import math

import pytest

import zoo
from tests.cli.conftest import tiny_overrides
from zoo import train

TASKS = [
    ("gpt", "causal_lm"),
    pytest.param("bert", "masked_lm", marks=pytest.mark.slow),
    pytest.param("t5", "seq2seq", marks=pytest.mark.slow),
]


def _first_step(preset: str, task: str, run_dir, *extra: str) -> dict:
    overrides = [
        f"model={preset}",
        f"task={task}",
        *[o for o in tiny_overrides(run_dir, enc_dec=preset == "t5") if not o.startswith("hydra.")],
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=1",
        "task.output_loss=chunked",
        *extra,
    ]
    outcome = train(zoo.compose(overrides), run_dir)
    assert outcome.summary is not None, outcome.failure
    rows = [r for r in csv.DictReader((run_dir / "metrics.csv").open()) if r.get("train/loss")]
    return rows[0]


@pytest.mark.parametrize("preset, task", TASKS)
def test_z_loss_is_logged_apart_and_train_loss_stays_the_cross_entropy(preset, task, tmp_path):
    plain = _first_step(preset, task, tmp_path / "plain")
    with_z = _first_step(preset, task, tmp_path / "z", "task.z_loss=0.01")
    assert "train/z_loss" not in plain or not plain["train/z_loss"]
    # the first step's loss is read before any update: the same weights, the same batch
    assert float(with_z["train/loss"]) == pytest.approx(float(plain["train/loss"]), rel=1e-5)
    # logged as the term added: 0.01 x mean log(Z)^2, and at initialisation (logits near 0)
    # Z is near the vocabulary size V = 300
    assert float(with_z["train/z_loss"]) == pytest.approx(0.01 * math.log(300) ** 2, rel=0.05)
