"""Exact resume at every kill point: a run SIGKILLed right after each kind of checkpoint it
writes (last.ckpt every N steps, last.ckpt at an epoch's end, best-*.ckpt after a validation,
last.ckpt at a step whose validation is still to run) and started again with the same command
ends with the weights of a run never stopped, bit for bit, and with its validation losses."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import model_state
from zoo.training.checkpoint.files import read_checkpoint

# four verses: 14 training windows, epochs of 3 batches of 4 (ends at steps 3 and 6); last.ckpt
# every 2 steps (2, 4, 6, 8) and at each epoch's end that is not one of them (3); a validation
# every 3 steps (3, 6: at the epochs' ends), best-*.ckpt after it, and one of the final step (8);
# dropout on, so the random streams count too
RUN = ["data.max_examples=4", "trainer.max_steps=8", "callbacks.checkpoint_every_n_steps=2", "model.dropout=0.1"]
HELPER = str(Path(__file__).with_name("kill_after_save.py"))

KILLS = {  # kind: (step, file, the hook that writes it, the step last.ckpt holds after the kill)
    "periodic": (4, "last.ckpt", "on_train_batch_end", 4),
    "epoch-end": (3, "last.ckpt", "on_train_epoch_end", 3),
    "validation": (3, "best-*.ckpt", "on_validation_end", 2),
    "periodic-before-validation": (6, "last.ckpt", "on_train_batch_end", 6),
}


def _val_losses(run: Path) -> list[tuple[int, str]]:
    with open(run / "metrics.csv", newline="") as f:
        return [(int(float(r["step"])), r["val/loss"]) for r in csv.DictReader(f) if r.get("val/loss")]


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("straight") / "run"
    result = zoo_train(*tiny_overrides(run), *RUN)  # forked; the killed runs below are interpreters of their own
    assert result.returncode == 0, result.stderr[-3000:]
    return run


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KILLS))
def test_a_run_killed_right_after_a_checkpoint_resumes_to_the_uninterrupted_weights(tmp_path, kind, straight, cli_here):
    """The killed run is a process of its own (SIGKILL: nothing after the write runs); the
    resume is zoo-train's main() in this process, the same command in the same directory."""
    step, file, hook, saved = KILLS[kind]
    run = tmp_path / "run"
    killed = subprocess.run(
        [sys.executable, HELPER, str(step), file, hook, *tiny_overrides(run), *RUN],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert not (run / "summary.json").exists()
    assert read_checkpoint(run / "checkpoints" / "last.ckpt", weights=False)["global_step"] == saved

    again = cli_here("train", *tiny_overrides(run), *RUN)
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_at_step"] == saved and summary["global_step"] == 8
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(run / "checkpoints" / "last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a), f"killed after the {kind} checkpoint: the weights differ"
    assert summary["metrics"]["val/loss"] == json.loads((straight / "summary.json").read_text())["metrics"]["val/loss"]
    assert _val_losses(run) == _val_losses(straight)
