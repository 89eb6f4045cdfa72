"""Prepared token shards: the same stream as tokenizing in memory, deterministic and named by
the corpus's content, the same bytes from any number of processes, an interrupted preparation
never read as complete (and its finished shards kept), a damaged shard prepared again, and
windows read across shard boundaries."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.training.distributed.conftest import wait_for
from zoo.data import build_datamodule
from zoo.data.files import load_files
from zoo.data.packing import concat_ids
from zoo.data.prepared import TokenStream, open_prepared, prepare, token_dtype
from zoo.data.split import split_train_val
from zoo.data.tokenize import tokenize_lm
from zoo.data.tokenizers import ByteTokenizer


def write_corpus(path: Path, n: int = 3000, salt: str = "") -> Path:
    path.write_text("".join(f"document {i}{salt}: the quick brown fox, number {i * 7 % 1000}\n" for i in range(n)))
    return path


def splits_of(path: Path, cache: Path):
    return split_train_val(load_files(str(path), cache_dir=str(cache / "datasets")), 0.1, 0)


def shard_bytes(directory: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.bin"))}


def test_the_prepared_stream_is_the_in_memory_stream(tmp_path):
    splits = splits_of(write_corpus(tmp_path / "c.txt"), tmp_path)
    tok = ByteTokenizer()
    prepared = prepare(tmp_path / "entry", splits, tok, "text", num_proc=1, docs_per_shard=700)
    for split in ("train", "validation"):
        expected = concat_ids(tokenize_lm(splits[split], tok, "text"))
        stream = prepared.streams[split]
        assert len(stream) == len(expected)
        assert np.array_equal(stream[0 : len(stream)], expected)
        assert np.array_equal(prepared.counts(split), np.bincount(expected, minlength=tok.vocab_size))
    assert len(prepared.index["splits"]["train"]["shards"]) == 4  # 2,700 documents, 700 a shard
    assert prepared.streams["train"].dtype == np.uint16 and token_dtype(70_000) == np.uint32


def test_windows_are_read_across_shard_boundaries(tmp_path):
    parts = [np.arange(a, b, dtype=np.uint32) for a, b in ((0, 5), (5, 5), (5, 13), (13, 20))]
    files = []
    for i, part in enumerate(parts):
        files.append(tmp_path / f"s{i}.bin")
        part.tofile(files[-1])
    stream = TokenStream(files, np.uint32)
    whole = np.arange(20)
    assert len(stream) == 20
    for a in range(20):
        for b in range(a, 21):
            assert np.array_equal(stream[a:b], whole[a:b]), (a, b)


def test_parallel_preparation_writes_the_same_bytes_and_a_changed_corpus_another_entry(tmp_path):
    corpus = write_corpus(tmp_path / "c.txt")
    cfg = {"source": "local", "path": str(corpus), "seq_len": 16, "cache_dir": str(tmp_path / "cache")}
    tok = {"kind": "sentencepiece_bpe", "vocab_size": 200, "cache_dir": str(tmp_path / "cache")}
    entries = []
    for num_proc in (1, 2):
        dm = build_datamodule(
            {**cfg, "num_proc": num_proc, "cache_dir": str(tmp_path / f"cache{num_proc}")},
            tok,
            "causal_lm",
            batch_size=2,
        )
        dm.setup()
        entries.append(dm.prepared)
    assert entries[0].directory.name == entries[1].directory.name  # same key
    assert shard_bytes(entries[0].directory) == shard_bytes(entries[1].directory)
    again = build_datamodule({**cfg, "cache_dir": str(tmp_path / "cache1")}, tok, "causal_lm", batch_size=2)
    again.setup()
    assert not again.prepared.built and again.prepared.directory == entries[0].directory
    write_corpus(corpus, salt="!")  # the same file, other content
    changed = build_datamodule({**cfg, "cache_dir": str(tmp_path / "cache1")}, tok, "causal_lm", batch_size=2)
    changed.setup()
    assert changed.prepared.built and changed.prepared.directory != entries[0].directory


def test_a_warm_run_maps_the_shards_without_loading_the_corpus(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "c.txt")
    cfg = {"source": "local", "path": str(corpus), "seq_len": 16, "cache_dir": str(tmp_path / "cache")}
    tok = {"kind": "sentencepiece_bpe", "vocab_size": 200, "cache_dir": str(tmp_path / "cache")}
    cold = build_datamodule(cfg, tok, "causal_lm", batch_size=2)
    cold.setup()
    import zoo.data.datamodule as datamodule

    def refuse(*args, **kwargs):
        raise AssertionError("the corpus was loaded although its prepared data is cached")

    monkeypatch.setattr(datamodule, "load_splits", refuse)
    warm = build_datamodule(cfg, tok, "causal_lm", batch_size=2)
    warm.setup()
    assert warm.tokenizer.from_cache and not warm.prepared.built
    assert all(
        np.array_equal(cold.train_dataset[i], warm.train_dataset[i]) for i in range(0, len(cold.train_dataset), 97)
    )


def test_a_damaged_shard_is_prepared_again(tmp_path, capfd):
    splits = splits_of(write_corpus(tmp_path / "c.txt"), tmp_path)
    entry = tmp_path / "entry"
    first = prepare(entry, splits, ByteTokenizer(), "text", num_proc=1, docs_per_shard=700)
    intact = shard_bytes(entry)
    shard = entry / first.index["splits"]["train"]["shards"][1]["file"]
    with open(shard, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff" * 50)
    capfd.readouterr()
    assert open_prepared(entry) is None
    assert "does not match the digest" in capfd.readouterr().err and not entry.exists()
    again = prepare(entry, splits, ByteTokenizer(), "text", num_proc=1, docs_per_shard=700)
    assert again.built and shard_bytes(entry) == intact


def _tampered(tmp_path, change) -> tuple[Path, Path]:
    """A prepared entry whose index.json `change` rewrites (digests recomputed to match)."""
    import hashlib
    import json

    splits = splits_of(write_corpus(tmp_path / "c.txt", n=800), tmp_path)
    entry = tmp_path / "cache" / "entry"
    prepare(entry, splits, ByteTokenizer(), "text", num_proc=1, docs_per_shard=400)
    index = json.loads((entry / "index.json").read_text())
    change(entry, index)
    for split in index["splits"].values():
        for shard in split["shards"]:
            path = entry / shard["file"]
            if path.is_file():
                shard["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (entry / "index.json").write_text(json.dumps(index))
    return entry, tmp_path / "outside.bin"


def test_a_shard_named_outside_its_entry_is_never_read(tmp_path, capfd):
    def point_outside(entry, index):
        outside = tmp_path / "outside.bin"
        first = index["splits"]["train"]["shards"][0]
        outside.write_bytes((entry / first["file"]).read_bytes())  # a valid shard, elsewhere
        first["file"] = "../../outside.bin"

    entry, outside = _tampered(tmp_path, point_outside)
    capfd.readouterr()
    assert open_prepared(entry) is None  # damaged: removed, prepared again
    assert "is not a file name inside the entry" in capfd.readouterr().err
    assert outside.is_file() and not entry.exists()


def test_ids_outside_the_vocabulary_are_found_before_training(tmp_path, capfd):
    def poison(entry, index):
        shard = entry / index["splits"]["validation"]["shards"][0]["file"]
        ids = np.fromfile(shard, dtype=np.dtype(index["dtype"]))
        ids[3] = index["vocab_size"] + 5
        ids.tofile(shard)

    entry, _ = _tampered(tmp_path, poison)
    capfd.readouterr()
    assert open_prepared(entry) is None
    assert "ids outside the vocabulary" in capfd.readouterr().err


def test_an_entry_of_another_vocabulary_size_is_prepared_again(tmp_path, capfd):
    entry, _ = _tampered(tmp_path, lambda entry, index: None)
    vocab = ByteTokenizer().vocab_size
    assert open_prepared(entry, vocab_size=vocab) is not None
    capfd.readouterr()
    assert open_prepared(entry, vocab_size=vocab + 1) is None
    assert f"the tokenizer's {vocab + 1}" in capfd.readouterr().err


@pytest.mark.slow
def test_an_interrupted_preparation_is_never_read_as_complete_and_keeps_its_shards(tmp_path):
    corpus = write_corpus(tmp_path / "c.txt", n=40_000)
    entry = tmp_path / "entry"
    script = textwrap.dedent(f"""
        import sys, time
        from zoo.data.tokenizers.byte import ByteTokenizer
        from zoo.data.prepared import prepare
        from tests.data.test_prepared import splits_of
        from pathlib import Path

        class Slow(ByteTokenizer):  # a tokenizer slow enough to be stopped part way
            def encode_batch(self, texts):
                time.sleep(0.05)
                return super().encode_batch(texts)

        splits = splits_of(Path({str(corpus)!r}), Path({str(tmp_path)!r}))
        prepare(Path({str(entry)!r}), splits, Slow(), "text", num_proc=1, docs_per_shard=2000)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    partial = Path(f"{entry}.partial")
    # a shard is finished once its record is written, after its .bin: wait for the records
    wait_for(lambda: len(list(partial.glob("train-*.bin.json"))) >= 3, 120, "three finished shards", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert open_prepared(entry) is None and not entry.exists()
    records = [p.name[: -len(".json")] for p in partial.glob("train-*.bin.json")]
    kept = {name: (partial / name).stat().st_mtime_ns for name in records}
    assert len(kept) >= 3
    # the resumed preparation forks its 2 workers from a process of its own, as zoo-prepare does:
    # forking this test worker, which holds the threads of earlier tests, can deadlock a child
    resume = textwrap.dedent(f"""
        from pathlib import Path
        from zoo.data.tokenizers.byte import ByteTokenizer
        from zoo.data.prepared import prepare
        from tests.data.test_prepared import splits_of
        done = prepare(Path({str(entry)!r}), splits_of(Path({str(corpus)!r}), Path({str(tmp_path)!r})),
                       ByteTokenizer(), "text", num_proc=2, docs_per_shard=2000)
        assert done.built
    """)
    resumed = subprocess.run(
        [sys.executable, "-c", resume], cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert not partial.exists()
    splits = splits_of(corpus, tmp_path)
    assert all((entry / name).stat().st_mtime_ns == mtime for name, mtime in kept.items())  # not redone
    fresh = prepare(tmp_path / "fresh", splits, ByteTokenizer(), "text", num_proc=1, docs_per_shard=2000)
    assert shard_bytes(entry) == shard_bytes(fresh.directory)


def test_array_tasks_prepare_their_own_shards_and_the_last_writes_the_entry(tmp_path):
    splits = splits_of(write_corpus(tmp_path / "c.txt"), tmp_path)
    tok = ByteTokenizer()
    whole = prepare(tmp_path / "whole", splits, tok, "text", num_proc=1, docs_per_shard=500)
    entry = tmp_path / "parts"
    assert prepare(entry, splits, tok, "text", num_proc=1, docs_per_shard=500, part=(1, 3)) is None
    assert prepare(entry, splits, tok, "text", num_proc=1, docs_per_shard=500, part=(0, 3)) is None
    partial = Path(f"{entry}.partial")
    assert (
        sorted(p.name for p in partial.glob("train-*.bin"))
        == [f"train-{i:05d}.bin" for i in range(6) if i % 3 in (0, 1)]
        and open_prepared(entry) is None
    )
    last = prepare(entry, splits, tok, "text", num_proc=1, docs_per_shard=500, part=(2, 3))
    assert last.built and shard_bytes(entry) == shard_bytes(whole.directory)
    assert last.index["splits"] == whole.index["splits"]
