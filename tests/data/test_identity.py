"""The identity of a run's data files (`zoo.data.identity`) names a change of content, not of
place: the same bytes under another absolute path (a moved project, a relative data.path read
from another directory) are no change; an edited, added or dropped file is one."""

from __future__ import annotations

from zoo.config.schema.data import DataConfig
from zoo.data.identity import changed_files, data_files, describe


def _files(tmp_path, name: str, texts: list[str]) -> DataConfig:
    folder = tmp_path / name
    folder.mkdir()
    for i, text in enumerate(texts):
        (folder / f"part{i}.txt").write_text(text)
    return DataConfig(source="local", path=str(folder), cache_dir=str(tmp_path / "cache"))


def test_the_same_files_elsewhere_are_no_change_and_an_edit_is_named(tmp_path):
    before = data_files(_files(tmp_path, "here", ["one\n", "two\n"]))
    assert before["data.path"][0]["size"] == 4 and len(before["data.path"][0]["sha256"]) == 64
    assert changed_files(before, data_files(_files(tmp_path, "moved", ["one\n", "two\n"]))) == []
    edited = data_files(_files(tmp_path, "edited", ["one\n", "two, edited\n", "three\n"]))
    said = [describe(c) for c in changed_files(before, edited)]
    assert said[0].startswith(f"data.path file {tmp_path / 'edited' / 'part1.txt'} changed (4 bytes, sha256 ")
    assert said[1] == f"data.path now also reads {tmp_path / 'edited' / 'part2.txt'}"
    assert [describe(c) for c in changed_files(edited, before)][
        -1
    ] == f"data.path no longer reads {tmp_path / 'edited' / 'part2.txt'}"


def test_a_built_in_corpus_records_no_files():
    assert data_files(DataConfig(source="kjv")) is None
