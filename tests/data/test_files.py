"""The user's own files: every format loads; every bad input is a one-line DataError."""

import json

import pandas as pd
import pytest

from zoo.config.schema.data import DataConfig
from zoo.data import DataError, ZooDataModule, load_files, load_splits

ROWS = [
    {"text": f"line number {i} of the file", "label": "even" if i % 2 == 0 else "odd", "target": f"target {i}"}
    for i in range(40)
]


def _write(tmp_path, ext):
    path = tmp_path / f"data{ext}"
    if ext == ".txt":
        path.write_text("\n".join(r["text"] for r in ROWS) + "\n\n", encoding="utf-8")
    elif ext == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in ROWS), encoding="utf-8")
    elif ext == ".json":
        path.write_text(json.dumps(ROWS), encoding="utf-8")
    elif ext == ".csv":
        pd.DataFrame(ROWS).to_csv(path, index=False)
    elif ext == ".tsv":
        pd.DataFrame(ROWS).to_csv(path, index=False, sep="\t")
    elif ext == ".parquet":
        pd.DataFrame(ROWS).to_parquet(path)
    return path


@pytest.mark.parametrize("ext", [".txt", ".jsonl", ".json", ".csv", ".tsv", ".parquet"])
def test_every_format_loads(ext, tmp_path, cache):
    path = _write(tmp_path, ext)
    ds = load_files(str(path), cache_dir=cache)
    assert len(ds) == 40  # the blank lines of the .txt file are dropped
    assert ds["text"] == [r["text"] for r in ROWS]
    if ext != ".txt":
        assert ds["label"][:2] == ["even", "odd"]


def test_glob_list_and_directory(tmp_path, cache):
    (tmp_path / "a.txt").write_text("first\nsecond\n")
    (tmp_path / "b.txt").write_text("third\n")
    assert load_files(str(tmp_path / "*.txt"), cache_dir=cache)["text"] == ["first", "second", "third"]
    assert len(load_files([str(tmp_path / "b.txt"), str(tmp_path / "a.txt")], cache_dir=cache)) == 3
    assert len(load_files(str(tmp_path), cache_dir=cache)) == 3


def test_txt_sample_by_paragraph(tmp_path, cache):
    (tmp_path / "p.txt").write_text("one\ntwo\n\nthree\n")
    ds = load_files(str(tmp_path / "p.txt"), sample_by="paragraph", cache_dir=cache)
    assert len(ds) == 2 and ds["text"][0].startswith("one\ntwo")


def test_val_path_is_used_as_validation(tmp_path, cache):
    train = _write(tmp_path, ".jsonl")
    val = tmp_path / "val.jsonl"
    val.write_text(json.dumps({"text": "held out"}) + "\n")
    splits = load_splits(DataConfig(source="local", path=str(train), val_path=str(val), cache_dir=cache))
    assert len(splits["train"]) == 40 and splits["validation"]["text"] == ["held out"]


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(DataError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_file(tmp_path, cache):
    msg = _error(load_files, str(tmp_path / "nope.txt"), cache_dir=cache)
    assert "no such file" in msg and "nope.txt" in msg
    assert "no file matches" in _error(load_files, str(tmp_path / "*.jsonl"), cache_dir=cache)


def test_empty_file(tmp_path, cache):
    (tmp_path / "empty.jsonl").write_text("")
    msg = _error(load_files, str(tmp_path / "empty.jsonl"), cache_dir=cache)
    assert "empty.jsonl is empty" in msg


def test_blank_text_file_has_no_examples(tmp_path, cache):
    (tmp_path / "blank.txt").write_text("\n \n\n")
    assert "holds no examples" in _error(load_files, str(tmp_path / "blank.txt"), cache_dir=cache)


@pytest.mark.parametrize("ext", [".txt", ".jsonl", ".csv"])
def test_undecodable_bytes(ext, tmp_path, cache):
    path = tmp_path / f"latin1{ext}"
    path.write_bytes("text\ncaf\u00e9 au lait\n".encode("latin-1"))
    msg = _error(load_files, str(path), cache_dir=cache)
    assert "not valid UTF-8" in msg and "0xe9" in msg and "offset 8" in msg


def test_unknown_extension(tmp_path, cache):
    (tmp_path / "data.xml").write_text("<a/>")
    msg = _error(load_files, str(tmp_path / "data.xml"), cache_dir=cache)
    assert "unsupported file type '.xml'" in msg and ".jsonl" in msg


def test_mixed_formats(tmp_path, cache):
    _write(tmp_path, ".txt")
    _write(tmp_path, ".csv")
    assert "cannot be mixed" in _error(load_files, str(tmp_path / "data.*"), cache_dir=cache)


def test_malformed_json(tmp_path, cache):
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"text": oops\n')
    msg = _error(load_files, str(tmp_path / "bad.jsonl"), cache_dir=cache)
    assert f"{tmp_path / 'bad.jsonl'}, line 2: not valid JSON" in msg  # the line datasets does not name


def test_missing_text_column_names_the_columns(tmp_path, cache):
    path = _write(tmp_path, ".jsonl")
    dm = ZooDataModule(
        {"source": "local", "path": str(path), "text_column": "body", "cache_dir": cache}, {"kind": "byte"}, "causal_lm"
    )
    msg = _error(dm.setup)
    assert "data.text_column='body'" in msg
    assert "columns: text, label, target" in msg


def test_missing_label_column(tmp_path, cache):
    path = _write(tmp_path, ".csv")
    dm = ZooDataModule(
        {"source": "local", "path": str(path), "label_column": "class", "cache_dir": cache},
        {"kind": "byte"},
        "classification",
    )
    assert "data.label_column='class'" in _error(dm.setup)


def test_nested_columns_are_addressed_with_dots(tmp_path):
    """WMT-style rows {"translation": {"en": ..., "es": ...}} are read with dotted column names."""
    import json

    from zoo.config.schema.data import as_data_config
    from zoo.data.sources import load_splits

    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps({"translation": {"en": f"one {i}", "es": f"uno {i}"}}) for i in range(40)))
    splits = load_splits(as_data_config({"source": "local", "path": str(path), "val_fraction": 0.1}))
    assert {"translation.en", "translation.es"} <= set(splits["train"].column_names)
    row = splits["train"][0]
    assert row["translation.es"] == row["translation.en"].replace("one", "uno")
