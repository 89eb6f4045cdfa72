"""Awkward corpora through `zoo-train`, as a user would hand them over: each is either trained on
or refused with one line that says what to change (exit status 2), never a traceback."""

from __future__ import annotations

import json
import random

import pytest

from tests.cli.conftest import zoo_train
from zoo.training.checkpoint.files import load_checkpoint

BASE = [
    "model.d_model=32",
    "model.n_heads=2",
    "model.n_layers=1",
    "model.max_seq_len=64",
    "data.seq_len=32",
    "data.global_batch_size=4",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=2",
    "callbacks.progress_bar=none",
    "scheduler.warmup_steps=1",
    "data=local",
]


def _refusal(result) -> str:
    """The one error line of a refused run ("" if the run was not refused cleanly: exit status
    other than 2, a traceback, or not exactly one error line)."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("zoo-train: error:")]
    clean = result.returncode == 2 and len(errors) == 1 and "Traceback" not in result.stderr
    return errors[0] if clean else ""


@pytest.fixture
def one_long_line(tmp_path):
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    path = tmp_path / "long.txt"
    path.write_text(" ".join(rng.choice(words) for _ in range(150_000)))  # ~1 MB, no newline
    return path


@pytest.mark.slow
def test_a_single_very_long_line_needs_a_validation_file(zoo_train_here, tmp_path, one_long_line):
    result = zoo_train_here(
        *BASE, f"data.path={one_long_line}", "tokenizer=byte", "model.vocab_size=300", f"hydra.run.dir={tmp_path / 'r'}"
    )
    message = _refusal(result)
    assert "1 example" in message and "data.val_path" in message, result.stderr[-3000:]


@pytest.mark.slow
def test_a_single_very_long_line_trains_a_subword_tokenizer(tmp_path, one_long_line):
    """SentencePiece skips sentences over its length limit; the line is cut into pieces for
    tokenizer training, so a one-line corpus still gets its subword vocabulary."""
    val = tmp_path / "val.txt"
    val.write_text(one_long_line.read_text()[:20_000])
    run = tmp_path / "r"
    result = zoo_train(
        *BASE,
        f"data.path={one_long_line}",
        f"data.val_path={val}",
        "tokenizer.vocab_size=300",
        "model.vocab_size=300",
        f"hydra.run.dir={run}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["global_step"] == 4
    tokenizer = load_checkpoint(run / "checkpoints" / "last.ckpt").tokenizer
    assert tokenizer.kind == "sentencepiece_bpe"
    text = "alpha beta gamma delta"
    assert len(tokenizer.encode(text)) < len(text) // 2  # whole-word pieces were learnt


@pytest.mark.slow
def test_mixed_encodings_are_refused_with_the_offending_byte(zoo_train_here, tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(
        b"plain ascii line\n"
        + "naïve in UTF-8\n".encode()
        + "café in Latin-1\n".encode("latin-1")
        + b"more text\n" * 20
    )
    result = zoo_train_here(
        *BASE, f"data.path={path}", "tokenizer=byte", "model.vocab_size=300", f"hydra.run.dir={tmp_path / 'r'}"
    )
    message = _refusal(result)
    assert "not valid UTF-8" in message and "0xe9" in message, result.stderr[-3000:]


@pytest.mark.slow
def test_empty_lines_only_are_refused(zoo_train_here, tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n\n   \n\t\n" * 50)
    result = zoo_train_here(
        *BASE, f"data.path={path}", "tokenizer=byte", "model.vocab_size=300", f"hydra.run.dir={tmp_path / 'r'}"
    )
    assert "holds no examples" in _refusal(result), result.stderr[-3000:]


@pytest.mark.slow
def test_an_empty_validation_split_is_refused(zoo_train_here, tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("\n".join(f"line number {i} of the training text" for i in range(200)))
    val = tmp_path / "val.txt"
    val.write_text("")
    result = zoo_train_here(
        *BASE,
        f"data.path={train}",
        f"data.val_path={val}",
        "tokenizer=byte",
        "model.vocab_size=300",
        f"hydra.run.dir={tmp_path / 'r'}",
    )
    assert "val.txt" in _refusal(result), result.stderr[-3000:]


@pytest.mark.slow
def test_unseen_labels_at_validation_are_refused(zoo_train_here, tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"sample {i},{'pos' if i % 2 else 'neg'}\n" for i in range(40)))
    val = tmp_path / "val.csv"
    val.write_text("text,label\nsample a,pos\nsample b,neutral\n")
    result = zoo_train_here(
        *BASE,
        "model=bert",
        "task=classification",
        f"data.path={train}",
        f"data.val_path={val}",
        "data.text_column=text",
        "data.label_column=label",
        "tokenizer=byte",
        "model.vocab_size=300",
        f"hydra.run.dir={tmp_path / 'r'}",
    )
    message = _refusal(result)
    assert "neutral" in message and "never seen in training" in message, result.stderr[-3000:]
