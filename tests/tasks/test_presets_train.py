"""Every model preset × task pair that makes sense composes and trains a few steps
(in-process, through the same `train` function the CLI calls)."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.cli.conftest import tiny_overrides
from zoo import train
from zoo.training.checkpoint.files import load_checkpoint

PAIRS = [
    ("gpt", "causal_lm"),
    ("llama", "causal_lm"),
    ("bert", "masked_lm"),
    ("transformer", "seq2seq"),
    ("t5", "seq2seq"),
    ("bart", "seq2seq"),
    ("bert", "classification"),
    ("gpt", "classification"),
    ("llama", "classification"),
]


def _compose(preset, task, run_dir, *extra):
    overrides = [
        f"model={preset}",
        f"task={task}",
        *[
            o
            for o in tiny_overrides(run_dir, enc_dec=preset in ("t5", "transformer", "bart"))
            if not o.startswith("hydra.")
        ],
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=1",
        *extra,
    ]
    return zoo.compose(overrides)


@pytest.mark.parametrize("preset, task", PAIRS)
@pytest.mark.slow
def test_preset_task_pair_trains(preset, task, tmp_path):
    result = train(_compose(preset, task, tmp_path), tmp_path)
    assert result.summary["global_step"] == 3
    loss = result.summary["metrics"]["val/loss"]
    assert torch.isfinite(torch.tensor(loss))


def test_load_checkpoint_rebuilds_the_trained_model(tmp_path):
    result = train(_compose("llama", "causal_lm", tmp_path), tmp_path)
    trained = result.task.model.eval()
    loaded = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert type(loaded) is type(result.task)
    ids = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        assert torch.allclose(loaded.model(ids).logits, trained(ids).logits, atol=1e-6)
    text = "In the beginning"
    assert loaded.tokenizer.decode(loaded.tokenizer.encode(text)) == text


@pytest.mark.slow
def test_a_short_default_style_run_beats_the_unigram_baseline(tmp_path):
    """The default recipe in miniature (GPT on the King James Bible) learns more than token
    frequencies within 80 steps."""
    cfg = zoo.compose(
        [
            "model.d_model=64",
            "model.n_heads=2",
            "model.n_layers=2",
            "model.vocab_size=128",
            "model.max_seq_len=64",
            "tokenizer=char",
            "data.seq_len=64",
            "data.global_batch_size=16",
            "data.max_examples=3000",
            "trainer.max_steps=80",
            "trainer.val_check_interval=80",
            "trainer.limit_val_batches=10",
            "callbacks.progress_bar=none",
            "scheduler.warmup_steps=10",
            "optim.lr=3e-3",
        ]
    )
    summary = train(cfg, tmp_path).summary
    assert summary["metrics"]["val/loss"] < summary["baseline"]["unigram_val_loss"] - 0.3
    assert summary["sample"].startswith("And God said")


@pytest.mark.parametrize("precision", ["16-mixed", "bf16-mixed"])
def test_mixed_precision_trains(precision, tmp_path):
    result = train(_compose("gpt", "causal_lm", tmp_path, f"trainer.precision={precision}"), tmp_path)
    assert result.summary["global_step"] == 3
    assert torch.isfinite(torch.tensor(result.summary["metrics"]["val/loss"]))
