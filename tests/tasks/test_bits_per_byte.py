"""val/bpb on real tiny runs, checked against the same quantity computed here from the
validation text: the model's cross-entropy on every validated target, over the bytes of text
those targets stand for, found by decoding each document's prefixes (not from the table the task
uses). Targets that stand for no text (eos) are left out of both sums. Also: the summary's
tokenizer and data records, zoo-eval's bpb on two gloo ranks, and seq2seq targets."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.cli.conftest import tiny_overrides
from tests.conftest import tiny
from tests.forked import fork_tool
from zoo import train
from zoo.config.schema.data import as_data_config
from zoo.data import build_tokenizer, load_tokenizer
from zoo.data.collate import collate_seq2seq
from zoo.data.corpora.kjv import kjv_verses
from zoo.data.sources import load_splits
from zoo.tasks import Seq2Seq
from zoo.training.checkpoint.files import load_checkpoint

WHOLE_SPLIT = "trainer.limit_val_batches=1.0"  # the final validation reads every window


def _train(root, tokenizer: str):
    overrides = [o for o in tiny_overrides() if not o.startswith(("hydra.", "tokenizer="))]
    cfg = zoo.compose([*overrides, f"tokenizer={tokenizer}", WHOLE_SPLIT])
    result = train(cfg, root)
    return root, result.summary, cfg


@pytest.fixture(scope="module")
def byte_run(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("byte"), "byte")


@pytest.fixture(scope="module")
def sentencepiece_run(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("sp"), "sentencepiece_bpe")


def _bytes_by_decoding(tokenizer, doc_ids: list[int]) -> list[int]:
    """Bytes of text each id of one document adds to what decode writes of the ids before it."""
    written = [len(tokenizer.decode(doc_ids[:k]).encode("utf-8")) for k in range(len(doc_ids) + 1)]
    return [b - a for a, b in zip(written, written[1:])]


def _recomputed(run_dir, cfg) -> dict:
    """The final validation, redone here: the validation documents encoded, each followed by
    eos, cut into windows of seq_len + 1 every seq_len ids, the last checkpoint's cross-entropy
    on each target, and the bytes of text each target stands for."""
    task = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    tok = task.tokenizer
    stream, text_bytes = [], []
    for text in load_splits(as_data_config(cfg.data))["validation"][cfg.data.text_column]:
        ids = tok.encode(text)
        counted = _bytes_by_decoding(tok, ids)
        assert sum(counted) == len(text.encode("utf-8")) and min(counted) >= 0
        stream += [*ids, tok.eos_id]
        text_bytes += [*counted, 0]
    T = cfg.data.seq_len
    windows = torch.tensor([stream[a : a + T + 1] for a in range(0, len(stream) - T, T)])  # (W, T+1)
    with torch.no_grad():
        logits = task.model(input_ids=windows[:, :-1]).logits  # (W, T, V)
    losses = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).double(), windows[:, 1:].reshape(-1), reduction="none"
    )  # (W·T,)
    # target j of window w is stream position w·T + j + 1: every position but the first, once
    target_bytes = torch.tensor(text_bytes[1 : 1 + windows.shape[0] * T], dtype=torch.float64)
    text = target_bytes > 0
    return {
        "val_loss": float(losses.mean()),
        "text_loss": float(losses[text].mean()),
        "text_tokens": int(text.sum()),
        "bytes": float(target_bytes.sum()),
        "nats": float(losses[text].sum()),
        "windows": windows.shape[0],
    }


@pytest.mark.parametrize("run", ["byte_run", "sentencepiece_run"])
def test_logged_val_bpb_is_the_validation_texts_bits_per_byte(run, request):
    run_dir, summary, cfg = request.getfixturevalue(run)
    metrics, here = summary["metrics"], _recomputed(run_dir, cfg)
    assert math.isclose(metrics["val/loss"], here["val_loss"], rel_tol=1e-5)
    expected = here["nats"] / (math.log(2) * here["bytes"])
    assert math.isclose(metrics["val/bpb"], expected, rel_tol=1e-5), (metrics["val/bpb"], expected)
    # the same figure as the text's mean loss, tokens per byte and ln 2
    tokens_per_byte = here["text_tokens"] / here["bytes"]
    assert math.isclose(metrics["val/bpb"], here["text_loss"] * tokens_per_byte / math.log(2), rel_tol=1e-5)
    if run == "byte_run":  # every counted token is one byte
        assert tokens_per_byte == 1.0
        assert math.isclose(metrics["val/bpb"], here["text_loss"] / math.log(2), rel_tol=1e-5)
    else:  # subword pieces: fewer tokens than bytes, so more bits per token than per byte
        assert tokens_per_byte < 0.7 and metrics["val/bpb"] < metrics["val/loss"] / math.log(2)
    # eos targets are left out: the text's mean loss is not val/loss
    assert here["text_tokens"] < here["windows"] * cfg.data.seq_len


@pytest.mark.parametrize("run", ["byte_run", "sentencepiece_run"])
def test_summary_records_the_tokenizer_and_the_sizes_of_the_splits(run, request):
    run_dir, summary, cfg = request.getfixturevalue(run)
    tok = load_tokenizer(run_dir / "tokenizer")
    assert summary["tokenizer"] == {
        "kind": cfg.tokenizer.kind.value,
        "vocab_size": tok.vocab_size,
        "digest": tok.digest(),
    }
    splits = load_splits(as_data_config(cfg.data))
    texts = {name: splits[name][cfg.data.text_column] for name in ("train", "validation")}
    stream_length = {name: sum(len(tok.encode(t)) + 1 for t in texts[name]) for name in texts}  # ids + eos
    data = dict(summary["data"])
    measured = data.pop("val_tokens_measured")  # the targets of the batches the last validation read
    assert data == {
        "train_tokens": stream_length["train"],
        "train_bytes": sum(len(t.encode("utf-8")) for t in texts["train"]),
        "val_tokens": stream_length["validation"],
    }
    assert 0 < measured <= data["val_tokens"]
    assert summary["tokens_seen"] / summary["data"]["train_tokens"] > 0  # epochs, as a comparison reads them


def test_a_streamed_run_records_no_training_size(tmp_path):
    """A stream's training split is read as it goes: its size is unknown (None); the held-out
    documents it validates on are counted, and val/bpb is logged as for prepared data."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: {'abc ' * (i % 9)}\n" for i in range(400)))
    overrides = [o for o in tiny_overrides() if not o.startswith(("hydra.", "data.max_examples", "trainer.max_steps"))]
    cfg = zoo.compose(
        [
            *overrides,
            "data=local",
            f"data.path={corpus}",
            "data.streaming=true",
            "data.val_documents=20",
            "trainer.max_steps=2",
            "scheduler.total_steps=2",
            "scheduler.warmup_steps=1",
        ]
    )
    summary = train(cfg, tmp_path / "run").summary
    held_out = [f"line {i}: {'abc ' * (i % 9)}" for i in range(20)]
    data = dict(summary["data"])
    measured = data.pop("val_tokens_measured")
    assert data == {
        "train_tokens": None,
        "train_bytes": None,
        "val_tokens": sum(len(t.encode("utf-8")) + 1 for t in held_out),
    }  # bytes + eos
    assert 0 < measured <= data["val_tokens"]
    assert summary["metrics"]["val/bpb"] > 0


def test_runs_with_other_tokenizers_have_other_digests(byte_run, sentencepiece_run):
    byte, sp = byte_run[1]["tokenizer"], sentencepiece_run[1]["tokenizer"]
    assert byte["digest"] != sp["digest"] and (byte["kind"], sp["kind"]) == ("byte", "sentencepiece_bpe")


@pytest.mark.slow
def test_zoo_eval_on_two_gloo_ranks_reports_the_same_bpb(sentencepiece_run, tmp_path):
    """Each rank validates its share of the windows; the sums of nats and bytes are reduced over
    the ranks before dividing, so two processes give the one-process figure."""
    run_dir, summary, _ = sentencepiece_run
    out = tmp_path / "eval.json"
    result = fork_tool(
        "eval", f"ckpt={run_dir / 'checkpoints' / 'last.ckpt'}", "devices=2", "batch_size=5", f"out={out}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(out.read_text())["metrics"]
    assert math.isclose(metrics["bpb"], summary["metrics"]["val/bpb"], rel_tol=1e-5)
    assert math.isclose(metrics["loss"], summary["metrics"]["val/loss"], rel_tol=1e-5)


def test_seq2seq_targets_count_their_texts_bytes(tmp_path):
    """A target y is read after bos: its first piece does not stand for the space SentencePiece
    puts before it, and every target row stands for exactly the bytes of its text."""
    verses = list(kjv_verses().texts[:200])
    tok = build_tokenizer({"kind": "sentencepiece_unigram", "vocab_size": 300, "cache_dir": str(tmp_path)}, verses)
    task = Seq2Seq(
        model=tiny("encoder_decoder", "learned", vocab_size=tok.vocab_size, max_seq_len=96), task={"kind": "seq2seq"}
    ).eval()
    task.tokenizer = tok
    pairs = list(zip(verses[:6], verses[1:7]))
    batch = collate_seq2seq(
        [{"input_ids": tok.encode(x)[:95] + [tok.eos_id], "target_ids": tok.encode(y)[:95]} for x, y in pairs]
    )
    with torch.no_grad():
        task.validation_step(batch, 0)
        logits = task.model(**{k: v for k, v in batch.items() if k != "labels"}).logits  # (B, T, V)
    labels = batch["labels"].reshape(-1)
    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), labels, ignore_index=-100, reduction="none")
    text = (labels != -100) & (labels != tok.eos_id)
    n_bytes = sum(len(tok.decode(tok.encode(y)[:95]).encode("utf-8")) for _, y in pairs)
    assert float(task.val_bpb.bytes) == n_bytes
    assert math.isclose(
        float(task.val_bpb.compute()), float(losses[text].sum()) / (math.log(2) * n_bytes), rel_tol=1e-5
    )
