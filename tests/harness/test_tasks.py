"""The built-in offline tasks: one harness YAML per builder, 200 examples each drawn from the
validation split only, the same on every call, and a task directory the harness loads."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from zoo.data.corpora.kjv import load_kjv
from zoo.data.split import split_train_val
from zoo.harness import tasks


def test_one_yaml_per_builder_naming_its_task_and_file():
    folder = resources.files("zoo.harness").joinpath("task_configs")
    names = sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
    assert names == sorted(tasks.BUILT_IN)
    for name in names:
        config = yaml.safe_load(folder.joinpath(f"{name}.yaml").read_text())
        assert config["task"] == name and config["dataset_kwargs"]["data_files"]["validation"] == f"{name}.jsonl"


def test_the_kjv_tasks_come_from_the_validation_split_and_repeat_exactly():
    split = split_train_val(load_kjv(), tasks.VAL_FRACTION, tasks.SPLIT_SEED)
    held_out, trained = set(split["validation"]["text"]), set(split["train"]["text"])
    cloze, choice = tasks.kjv_cloze(), tasks.kjv_next_verse()
    assert len(cloze) == len(choice) == tasks.EXAMPLES
    assert cloze == tasks.kjv_cloze() and choice == tasks.kjv_next_verse()
    for row in cloze:
        verse = next(t for t in held_out if t.startswith(row["context"] + row["target"]))
        assert verse not in trained and row["target"].startswith(" ") and row["target"][1:].isalpha()
    for row in choice:
        assert row["context"] in held_out and len(row["choices"]) == len(set(row["choices"])) == tasks.CHOICES
        assert 0 <= row["label"] < tasks.CHOICES


def test_the_materialized_directory_is_reused_and_loads_in_the_harness(tmp_path):
    pytest.importorskip("lm_eval")
    from zoo.harness.run import task_manager

    first = tasks.materialize(["kjv_cloze"], cache_dir=str(tmp_path))
    assert tasks.materialize(["kjv_cloze"], cache_dir=str(tmp_path)) == first
    assert sorted(p.name for p in first.iterdir()) == ["kjv_cloze.jsonl", "kjv_cloze.yaml", tasks.MANIFEST]
    assert str(first / "kjv_cloze.jsonl") in (first / "kjv_cloze.yaml").read_text()
    assert "kjv_cloze" in task_manager(["kjv_cloze"], cache_dir=str(tmp_path)).all_tasks
