"""The corpus table (`zoo.config.facts.corpora.CORPUS_ROWS`) agrees with what it describes: every
built-in corpus has one row, a `DataSource` member, a name in `data.source`'s help and a
conf/data file; its loader exists and takes the settings the row names; it is read from the
package the row names; and, read through the data module's loading, it has the columns of each
task the row says it serves. A new corpus is checked here as soon as it has a row."""

from __future__ import annotations

import inspect
from dataclasses import fields
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from zoo.config.errors import ConfigError
from zoo.config.facts.corpora import CORPORA_BY_NAME, CORPUS_ROWS, EXTERNAL, PYTHON, CorpusRow, corpus_row
from zoo.config.facts.tasks import TASK_SPECS
from zoo.config.schema.data import DataConfig, DataSource, as_data_config
from zoo.data.corpora import CORPORA, loader_of
from zoo.data.sources import corpus_key, load_splits

CONF = Path(__file__).resolve().parents[3] / "conf" / "data"
NAMES = [row.name for row in CORPUS_ROWS]
SERVED = [(row.name, task) for row in CORPUS_ROWS for task in row.tasks]


def conf_of(name: str) -> dict:
    return yaml.safe_load((CONF / f"{name}.yaml").read_text())


def test_each_corpus_has_one_row_a_source_and_a_config_file():
    assert len(set(NAMES)) == len(NAMES) == len(CORPORA_BY_NAME)
    assert [m.value for m in DataSource] == [*NAMES, *EXTERNAL]
    assert list(CORPORA) == NAMES
    assert {p.stem for p in CONF.glob("*.yaml")} == {*NAMES, *EXTERNAL}
    assert all(conf_of(name)["source"] == name for name in NAMES)


def test_the_help_of_data_source_names_every_corpus():
    help_text = next(f.metadata["help"] for f in fields(DataConfig) if f.name == "source")
    assert all(name in help_text for name in NAMES)
    with pytest.raises(ConfigError, match="choose one of: " + ", ".join([*NAMES, *EXTERNAL]) + "$"):
        DataConfig(source="wiki")


@pytest.mark.parametrize("name", NAMES)
def test_a_rows_loader_takes_its_settings_and_its_package_is_installed(name):
    row = corpus_row(name)
    parameters = inspect.signature(loader_of(row)).parameters
    assert set(parameters) == set(row.settings)
    assert set(row.settings) <= {f.name for f in fields(DataConfig)}
    assert row.what and (row.package == PYTHON or version(row.package))


@pytest.mark.parametrize("name", NAMES)
def test_a_prepared_corpus_is_told_apart_by_its_settings(name):
    row = corpus_row(name)
    cfg = as_data_config(conf_of(name))
    for setting in row.settings:
        other = as_data_config({**conf_of(name), setting: getattr(cfg, setting) + 1})
        assert corpus_key(other) != corpus_key(cfg)


@pytest.mark.parametrize("name,task", SERVED, ids=lambda v: str(v))
def test_a_corpus_has_the_columns_of_each_task_it_serves(name, task):
    cfg = as_data_config({**conf_of(name), "max_examples": 20})
    splits = load_splits(cfg)
    for key in TASK_SPECS[task].columns:
        for split in ("train", "validation"):
            assert getattr(cfg, key) in splits[split].column_names, (key, split)
    assert len(splits["train"]) == 20 and len(splits["validation"]) >= 1


def test_a_row_refuses_a_loader_outside_the_corpora_and_a_corpus_that_serves_nothing():
    with pytest.raises(ValueError, match="loader must be zoo.data.corpora.MODULE:function"):
        CorpusRow(name="x", what="x", package=PYTHON, tasks=tuple(TASK_SPECS)[:1], loader="os:listdir")
    with pytest.raises(ValueError, match="must serve a task"):
        CorpusRow(name="x", what="x", package=PYTHON, tasks=(), loader="zoo.data.corpora.x:load")
