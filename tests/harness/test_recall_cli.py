"""`zoo-eval ckpt=RUN probe=recall` end to end: a run trained on data=recall is scored, the
table printed, the JSON and CSV written as new files of the run's harness/ directory each time
(and to out=); bad arguments are one line before anything loads; an encoder-only checkpoint
and a run of another dataset are refused on one line. The slow test trains a tiny decoder on an
easy setting and finds it well above chance."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from tests.cli.conftest import tiny_overrides

RECALL = [
    "data=recall",
    "tokenizer=char",
    "data.seq_len=17",
    "data.recall_vocab=16",
    "data.recall_pairs=2",
    "model.vocab_size=22",
    "model.max_seq_len=32",
]


def _train(cli_here, run, *extra):
    done = cli_here("train", *tiny_overrides(run), *extra)
    assert done.returncode == 0, done.stderr[-2000:]
    return run


def _one_line(done, text):
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], lines


@pytest.fixture
def fake_ckpt(tmp_path):
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    torch.save({}, ckpt)
    return ckpt


@pytest.mark.parametrize(
    "extra, refusal",
    [
        (["probe=recal"], "probe='recal' is not a probe; choose one of: recall"),
        (["pairs=4"], "pairs=, examples= and seed= apply to probe=recall"),
        (["probe=recall", "harness=kjv_cloze"], "probe= and harness= are separate evaluations"),
        (["probe=recall", "data.seq_len=8"], "probe= draws its own sequences"),
        (["probe=recall", "split=train"], "probe= draws its own sequences"),
        (["probe=recall", "devices=2"], "probe= runs on one device"),
        (["probe=recall", "examples=0"], "examples must be a number of sequences >= 1, got 0"),
        (["probe=recall", "seed=-1"], "seed must be an integer >= 0, got -1"),
        (["probe=recall", "accelerator=tpu"], "accelerator='tpu': probe= runs on cpu, gpu or auto"),
    ],
)
def test_bad_arguments_are_one_line_before_the_checkpoint_loads(fake_ckpt, cli_here, extra, refusal):
    _one_line(cli_here("eval", f"ckpt={fake_ckpt}", *extra), refusal)
    assert not (fake_ckpt.parent.parent / "harness").exists()


def test_a_recall_run_is_scored_into_new_files_and_out(tmp_path, cli_here):
    run = _train(cli_here, tmp_path / "run", *RECALL, "data.recall_examples=200", "trainer.max_steps=3")
    out = tmp_path / "recall.json"
    args = ("eval", f"ckpt={run}", "probe=recall", "pairs=1,2", "examples=30", "batch_size=8")
    done = cli_here(*args, f"out={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    head, columns, *rows = done.stdout.strip().splitlines()
    assert head.startswith("recall (MQAR): 16 symbols, 16 per sequence, 30 sequences per pair count, chance 0.1250")
    assert columns.split() == ["pairs", "distance", "queries", "accuracy", "interval"]
    assert [r.split()[:3] for r in rows if r.split()[1] == "all"] == [["1", "all", "30"], ["2", "all", "60"]]
    result = json.loads(out.read_text())
    assert result["checkpoint"] == str(run) and result["seed"] == 1 and result["chance"] == 1 / 8
    files = sorted((run / "harness").iterdir())
    assert [f.suffix for f in files] == [".csv", ".json"]
    assert json.loads(files[1].read_text()) == result
    table = list(csv.DictReader(files[0].open()))
    assert len(table) == len(result["rows"]) == len(rows)
    for row in result["rows"]:
        assert 0 <= row["low"] <= row["accuracy"] <= row["high"] <= 1
    again = cli_here(*args, "seed=4")
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(list((run / "harness").glob("recall-*.json"))) == 2  # the first file kept
    _one_line(cli_here("eval", f"ckpt={run}", "probe=recall", "pairs=9"), "pairs=9 is more pairs than the 7 keys")
    _one_line(
        cli_here("eval", f"ckpt={run}", "probe=recall", "seq_len=40"),
        "seq_len gives sequences of 39 symbols, past the model's positions (model.max_seq_len=32)",
    )


@pytest.mark.parametrize(
    "extra, refusal",
    [
        (["model=bert"], "probe=recall scores a causal language model; "),
        ([], "probe=recall scores a run trained on data=recall (its symbols and sequence length); "),
    ],
    ids=["encoder-only", "another dataset"],
)
def test_a_checkpoint_it_cannot_score_is_refused_on_one_line(tmp_path, cli_here, extra, refusal):
    run = _train(cli_here, tmp_path / "run", *extra, "trainer.max_steps=3")
    done = cli_here("eval", f"ckpt={run}", "probe=recall")
    _one_line(done, refusal)
    tail = "is task=masked_lm (model.family=encoder_only)" if extra else "trained on data.source=kjv"
    assert tail in done.stderr
    assert not (run / "harness").exists() or not list((run / "harness").iterdir())


@pytest.mark.slow  # trains 300 steps (~1 min on a CPU)
def test_a_tiny_decoder_learns_recall_well_above_chance(tmp_path, cli_here):
    """Two pairs of 7 keys and 8 values: chance 1/8. With the loss on the wrong positions (or
    the targets shifted) the model cannot beat it; trained on the answers it does, by far."""
    run = _train(
        cli_here,
        tmp_path / "run",
        *RECALL,
        "model=llama",
        "model.d_model=64",
        "model.n_heads=2",
        "model.n_layers=2",
        "data.recall_examples=4000",
        "data.global_batch_size=64",
        "data.max_examples=null",
        "optim.lr=3e-3",
        "scheduler.warmup_steps=20",
        "trainer.max_steps=300",
        "trainer.val_check_interval=300",
        "trainer.limit_val_batches=1.0",
        "callbacks.checkpoint_every_n_steps=300",
    )
    done = cli_here("eval", f"ckpt={run}", "probe=recall", "examples=300")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(sorted((run / "harness").glob("recall-*.json"))[-1].read_text())
    overall = result["rows"][0]
    assert overall["distance"] == "all" and result["chance"] == 1 / 8
    assert overall["low"] > 3 * result["chance"], overall  # 0.73 when written; chance 0.125
