"""The config groups say only what differs from their schema: a key set to the schema's own
default is noise that hides what an option changes (and goes stale when the default moves).
A preset keeps the keys that name it (`kind`, `family`, `source`)."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path

import pytest
import yaml

from zoo.config.schema.data import DataConfig, TokenizerConfig
from zoo.config.schema.logger import LoggerConfig
from zoo.config.schema.model import ModelConfig, PositionConfig
from zoo.config.schema.task import TaskConfig
from zoo.config.schema.train import CallbacksConfig, OptimConfig, SchedulerConfig

CONF = Path(__file__).resolve().parents[3] / "conf"
SCHEMAS = {
    "model": ModelConfig,
    "model/position": PositionConfig,
    "task": TaskConfig,
    "data": DataConfig,
    "tokenizer": TokenizerConfig,
    "optim": OptimConfig,
    "scheduler": SchedulerConfig,
    "callbacks": CallbacksConfig,
    "logger": LoggerConfig,
}
NAMING_KEYS = {"kind", "family", "source"}


def _default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return dataclasses.MISSING
    value = value.value if isinstance(value, enum.Enum) else value
    return list(value) if isinstance(value, tuple) else value


def _same(given, default) -> bool:
    if isinstance(given, bool) or isinstance(default, bool):
        return given is default
    if isinstance(default, float) and isinstance(given, (int, float)):
        return float(given) == default
    return given == default


FILES = [(group, path) for group in SCHEMAS for path in sorted((CONF / group).glob("*.yaml"))]


@pytest.mark.parametrize("group, path", FILES, ids=[f"{g}/{p.stem}" for g, p in FILES])
def test_a_config_file_sets_no_key_to_its_schema_default(group, path):
    data = yaml.safe_load(path.read_text()) or {}
    defaults = {f.name: _default(f) for f in dataclasses.fields(SCHEMAS[group])}
    restated = [
        key
        for key, value in data.items()
        if key in defaults and key not in NAMING_KEYS and not isinstance(value, dict) and _same(value, defaults[key])
    ]
    assert restated == [], f"{path.relative_to(CONF)} restates the schema's defaults of {restated}"


def test_the_check_sees_a_restated_default(tmp_path):
    defaults = {f.name: _default(f) for f in dataclasses.fields(DataConfig)}
    assert _same(yaml.safe_load("0.05"), defaults["val_fraction"])
    assert not _same(yaml.safe_load("0.1"), defaults["val_fraction"])
    assert not _same(yaml.safe_load("1"), True) and _same(yaml.safe_load("true"), True)
