"""Cache entries prove they are intact: a converted corpus or tokenized file with overwritten
bytes, or cut short, is built again (with one line naming it) and the ids are those of an intact
cache; a tokenizer whose model file was changed is trained again, or refused where it is not a
cache entry."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from zoo.data.errors import DataError
from zoo.data.files import load_files
from zoo.data.integrity import SUFFIX, file_digest
from zoo.data.split import split_train_val
from zoo.data.tokenize import tokenize_lm
from zoo.data.tokenizers import ByteTokenizer, build_tokenizer, load_tokenizer


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"line {i} of the corpus, with some words to tokenize\n" for i in range(3000)))
    return path


def tokenized(path: Path, cache: Path):
    raw = load_files(str(path), cache_dir=str(cache))
    splits = split_train_val(raw, 0.1, 0)
    return tokenize_lm(splits["train"], ByteTokenizer(), "text")


def ids(ds) -> list:
    return [row for row in ds["input_ids"]]


def arrow_files(cache: Path, pattern: str) -> list[Path]:
    return sorted(p for p in cache.rglob(pattern) if p.suffix == ".arrow")


@pytest.mark.parametrize("damage", ["overwrite", "truncate"])
@pytest.mark.parametrize("entry", ["converted corpus", "tokenized"])
def test_a_damaged_arrow_entry_is_built_again(entry, damage, tmp_path, capfd):
    path, cache = corpus(tmp_path), tmp_path / "cache"
    intact = ids(tokenized(path, cache))
    if entry == "converted corpus":
        (target,) = arrow_files(cache, "*-train.arrow")
    else:  # the largest of the map/filter/split files: the tokenized training split
        target = max(arrow_files(cache, "cache-*.arrow"), key=lambda p: p.stat().st_size)
    assert Path(str(target) + SUFFIX).is_file()  # the digest written with the entry
    size = target.stat().st_size
    with open(target, "r+b") as fh:
        if damage == "overwrite":
            fh.seek(size // 2)
            fh.write(b"\x07" * 1000)
        else:
            fh.truncate(size // 2)
    capfd.readouterr()
    again = ids(tokenized(path, cache))
    err = capfd.readouterr().err
    assert again == intact
    assert "built it again" in err
    if damage == "overwrite":
        assert str(target) in err
    # and the next run finds a sound entry: no notice
    assert ids(tokenized(path, cache)) == intact
    assert "built it again" not in capfd.readouterr().err


def _sentencepiece(tmp_path):
    texts = ["the quick brown fox jumps over the lazy dog " * 3] * 50
    cfg = {"kind": "sentencepiece_bpe", "vocab_size": 60, "cache_dir": str(tmp_path / "cache")}
    return cfg, texts


def _rename_a_piece(directory: Path) -> None:
    model = directory / "sentencepiece.model"
    data = model.read_bytes()
    at = data.index("\u2581the".encode())
    model.write_bytes(data[:at] + "\u2581thx".encode() + data[at + len("\u2581the".encode()) :])


def test_a_changed_tokenizer_cache_entry_is_trained_again(tmp_path, capfd):
    cfg, texts = _sentencepiece(tmp_path)
    first = build_tokenizer(cfg, texts)
    (entry,) = (tmp_path / "cache" / "tokenizers").iterdir()
    assert json.loads((entry / "tokenizer.json").read_text())["sha256"] == first.digest()
    _rename_a_piece(entry)
    capfd.readouterr()
    again = build_tokenizer(cfg, texts)
    assert "does not match the digest" in capfd.readouterr().err
    assert not again.from_cache and again.digest() == first.digest()
    assert again.encode("the lazy dog") == first.encode("the lazy dog")
    assert build_tokenizer(cfg, texts).from_cache  # the rebuilt entry is sound


def test_a_changed_tokenizer_directory_is_refused(tmp_path):
    cfg, texts = _sentencepiece(tmp_path)
    saved = build_tokenizer(cfg, texts).save(tmp_path / "tok")
    _rename_a_piece(saved)
    with pytest.raises(DataError, match="does not match the digest recorded when it was saved"):
        load_tokenizer(saved)
    (saved / "sentencepiece.model").write_bytes(b"not a model")
    with pytest.raises(DataError, match="sentencepiece.model does not match the digest"):
        load_tokenizer(saved)  # found before the model file reaches sentencepiece
    meta = json.loads((saved / "tokenizer.json").read_text())
    del meta["files"]  # a record from before the manifest: the parser's own failure, on one line
    (saved / "tokenizer.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="cannot be read"):
        load_tokenizer(saved)


# -- no trust on first use ---------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["converted corpus", "tokenized"])
def test_an_arrow_entry_without_its_record_is_built_again_not_blessed(entry, tmp_path, capfd):
    """Deleting the sidecar used to make the next run record whatever bytes were there."""
    path, cache = corpus(tmp_path), tmp_path / "cache"
    intact = ids(tokenized(path, cache))
    if entry == "converted corpus":
        (target,) = arrow_files(cache, "*-train.arrow")
    else:
        target = max(arrow_files(cache, "cache-*.arrow"), key=lambda p: p.stat().st_size)
    with open(target, "r+b") as fh:
        fh.seek(target.stat().st_size // 2)
        fh.write(b"\x07" * 1000)
    Path(str(target) + SUFFIX).unlink()
    time.sleep(0.2)  # planted before the run (the check allows the kernel clock 50 ms)
    capfd.readouterr()
    again = ids(tokenized(path, cache))
    err = capfd.readouterr().err
    assert again == intact
    if entry == "tokenized":
        assert "has no digest record; built it again" in err and str(target) in err
    else:  # datasets itself finds this file unusable and converts the corpus again, recorded as new
        assert "Generating train split" in err
    assert Path(str(target) + SUFFIX).read_text().strip() == file_digest(target)
    assert ids(tokenized(path, cache)) == intact  # recorded by the rebuild: sound from now on
    assert "built it again" not in capfd.readouterr().err


def test_a_tokenizer_without_its_digest_record_is_retrained_or_refused(tmp_path, capfd):
    cfg, texts = _sentencepiece(tmp_path)
    first = build_tokenizer(cfg, texts)
    (entry,) = (tmp_path / "cache" / "tokenizers").iterdir()
    for directory in (entry, first.save(tmp_path / "tok")):
        meta = json.loads((directory / "tokenizer.json").read_text())
        del meta["sha256"]
        (directory / "tokenizer.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="has no digest record"):
        load_tokenizer(tmp_path / "tok")  # outside the cache: refused
    capfd.readouterr()
    again = build_tokenizer(cfg, texts)  # in the cache: trained again
    assert "has no digest record" in capfd.readouterr().err
    assert not again.from_cache and again.digest() == first.digest()


@pytest.mark.parametrize("umask, mode", [(0o002, 0o775), (0o022, 0o755)])
def test_a_shared_tokenizer_cache_entry_follows_the_umask(tmp_path, umask, mode):
    """A tokenizer entry is made in a temporary directory (0700) and renamed into the cache: a
    second user of a team's cache could not read it."""
    import subprocess
    import sys

    script = (
        f"import os; os.umask({umask}); from zoo.data.tokenizers import build_tokenizer; "
        f"build_tokenizer({{'kind': 'sentencepiece_bpe', 'vocab_size': 60, 'cache_dir': {str(tmp_path)!r}}}, "
        f"['the quick brown fox jumps over the lazy dog ' * 3] * 50)"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True)
    (entry,) = (tmp_path / "tokenizers").iterdir()
    assert entry.stat().st_mode & 0o777 == mode
