"""Cache entries prove they are intact: a converted corpus or tokenized file with overwritten
bytes, or cut short, is built again (with one line naming it) and the ids are those of an intact
cache; a tokenizer whose model file was changed is trained again, or refused where it is not a
cache entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zoo.data.errors import DataError
from zoo.data.files import load_files
from zoo.data.integrity import SUFFIX
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
    model.write_bytes(data[:at] + "\u2581thx".encode() + data[at + len("\u2581the".encode()):])


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
    with pytest.raises(DataError, match="cannot be read"):
        load_tokenizer(saved)
