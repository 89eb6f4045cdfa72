"""Streamed language-model data: the same windows as the prepared (packed) stream of the same
documents, from any saved position; ranks take every W-th window, so a step trains on the same
windows for any number of ranks, and a resumed loader, on the same or another number of ranks,
continues with the windows an uninterrupted one would read; through zoo-train, a resumed streamed
run ends with the weights of an uninterrupted one."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import zoo.data.streaming as streaming
from tests.cli.conftest import tiny_overrides
from tests.training.distributed.conftest import model_state
from zoo.config.schema.data import DataConfig
from zoo.data.errors import DataError
from zoo.data.packing import PackedBlocks
from zoo.data.streaming import StreamedWindows, StreamEnded, StreamLoader, token_windows
from zoo.data.tokenizers import ByteTokenizer

DOCS = [f"doc {i}: " + "word " * (i * 7 % 23) for i in range(300)]
BLOCK, STRIDE = 17, 16


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(streaming, "BATCH_DOCUMENTS", 7)  # windows cross tokenizer batches


def packed_windows() -> list[np.ndarray]:
    tokens = ByteTokenizer().encode_documents(DOCS, np.int64)
    blocks = PackedBlocks(tokens, block=BLOCK, stride=STRIDE)
    return [blocks[i].numpy() for i in range(len(blocks))]


def test_streamed_windows_are_the_packed_windows_from_every_saved_position():
    expected = packed_windows()
    got = list(token_windows(iter(DOCS), ByteTokenizer(), BLOCK, STRIDE))
    assert len(got) == len(expected) and all(np.array_equal(g, e) for (g, _), e in zip(got, expected))
    for k in (1, 5, 33, len(got) - 1):
        doc, offset, number = got[k - 1][1]  # the position after window k-1
        assert number == k
        resumed = [
            w for w, _ in token_windows(iter(DOCS[doc:]), ByteTokenizer(), BLOCK, STRIDE, start=(doc, offset, number))
        ]
        assert all(np.array_equal(a, b) for a, b in zip(resumed, expected[k:])) and len(resumed) == len(expected) - k


def loader(world: int, rank: int, batch: int) -> StreamLoader:
    windows = StreamedWindows(lambda d: iter(DOCS[d:]), ByteTokenizer(), BLOCK, STRIDE, rank=rank, world=world)
    return StreamLoader(windows, batch_size=batch)


def test_ranks_split_each_step_and_a_resume_on_another_world_size_continues_exactly():
    expected = packed_windows()
    one = loader(1, 0, 4)
    steps = [b for _, b in zip(range(6), one)]
    two = [loader(2, r, 2) for r in (0, 1)]
    for step, pair in zip(steps, zip(*two)):
        assert sorted(map(tuple, torch.cat(pair).tolist())) == sorted(map(tuple, step.tolist()))
    # stop two ranks after 3 steps; resume on one rank: steps 4, 5, 6 as the uninterrupted run
    ranks = [loader(2, r, 2) for r in (0, 1)]
    iters = [iter(r) for r in ranks]
    for _ in range(3):
        [next(it) for it in iters]
    state = ranks[0].state_dict()  # rank 0's checkpoint
    assert state["next_window"] == 12
    resumed = loader(1, 0, 4)
    resumed.load_state_dict(state)
    for step, batch in zip(steps[3:], resumed):
        assert torch.equal(step, batch)
    assert all(np.array_equal(w, e) for w, e in zip(torch.cat(steps).numpy(), expected))


def test_a_spent_stream_stops_on_one_line_instead_of_starting_empty_epochs():
    """A stream is read once: past its last window the loader raises (before, each further
    epoch began at the end, gave no batch, and training never reached trainer.max_steps)."""
    expected = packed_windows()
    one = loader(1, 0, 4)
    batches = []
    with pytest.raises(StreamEnded, match=f"ended after {len(expected):,} windows of {BLOCK} tokens"):
        for batch in one:
            batches.append(batch)
    assert sum(len(b) for b in batches) == len(expected)


def test_val_documents_holding_out_the_whole_stream_is_refused_on_one_line(tmp_path, cli_here):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}\n" for i in range(20)))
    common = [o for o in tiny_overrides(tmp_path / "run") if not o.startswith("data.max_examples")]
    r = cli_here("train", *common, "data=local", f"data.path={corpus}", "data.streaming=true", "data.val_documents=50")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "zoo-train: error: data.val_documents=50 holds out every document of the stream (it has 20), "
        "leaving none to train on: lower data.val_documents or give data.val_path"
    )
    assert "Traceback" not in r.stderr


def test_a_streamed_column_is_read_by_its_dotted_name_and_a_missing_one_is_one_line(tmp_path):
    """As the prepared path's flattened columns: WMT-style nested columns by dotted names; a
    column the rows lack names the ones they have (it was a KeyError's traceback)."""
    rows = tmp_path / "pairs.jsonl"
    rows.write_text(
        "".join(json.dumps({"translation": {"en": f"one {i}", "de": f"eins {i}"}}) + "\n" for i in range(5))
    )
    cfg = DataConfig(source="local", path=str(rows), streaming=True)
    assert list(streaming.open_stream(cfg, "translation.en", skip=1, first=2)) == ["one 1", "one 2"]
    with pytest.raises(DataError) as info:
        list(streaming.open_stream(cfg, "translation.fr", skip=0))
    assert str(info.value) == (
        f"data.text_column='translation.fr' is not a column of data.path={rows}; columns: translation.en, translation.de"
    )


@pytest.mark.slow
def test_a_resumed_streamed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, cli_here):
    """Each run is zoo-train's main() in this process: the resume reads the stream's position
    from last.ckpt (zoo holds no stream state between runs)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: {'abc ' * (i % 9)}\n" for i in range(2000)))
    common = [o for o in tiny_overrides() if not o.startswith(("trainer.max_steps", "data.max_examples"))]
    common += [
        "data=local",
        f"data.path={corpus}",
        "data.streaming=true",
        "data.val_documents=50",
        "scheduler.total_steps=12",
        "model.dropout=0.1",
    ]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    r = cli_here("train", *common, "trainer.max_steps=12", f"hydra.run.dir={whole}")
    assert r.returncode == 0, r.stderr[-3000:]
    r = cli_here("train", *common, "trainer.max_steps=6", f"hydra.run.dir={parts}")
    assert r.returncode == 0, r.stderr[-3000:]
    r = cli_here("train", *common, "trainer.max_steps=12", f"hydra.run.dir={parts}")
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = model_state(whole / "checkpoints" / "last.ckpt"), model_state(parts / "checkpoints" / "last.ckpt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
