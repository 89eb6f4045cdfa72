"""Built-in corpora, read offline from installed packages, one file each. What each is, the
package it is read from, the tasks it serves and its loader are its row of
`zoo.config.facts.corpora.CORPUS_ROWS`; zoo/data/corpora/README.md says how to add one. `CORPORA` maps
a `data.source` name to `(DataConfig) -> datasets.Dataset` (one split; the data module holds out
validation)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from zoo.config.facts.corpora import CORPUS_ROWS, CorpusRow
from zoo.data.corpora.kjv import kjv_verses, load_kjv
from zoo.data.corpora.numbers import english, load_numbers, spanish
from zoo.data.corpora.pydoc import load_pydoc
from zoo.data.corpora.recall import load_recall
from zoo.data.corpora.testament import load_testament
from zoo.data.corpora.unicode import load_unicode


def loader_of(row: CorpusRow) -> Callable[..., Any]:
    """The function the row's `loader` (`module:function`) names."""
    module, _, function = row.loader.partition(":")
    return getattr(importlib.import_module(module), function)


def _from_config(row: CorpusRow) -> Callable[[Any], Any]:
    loader = loader_of(row)
    return lambda cfg: loader(**{name: getattr(cfg, name) for name in row.settings})


CORPORA: dict[str, Callable[[Any], Any]] = {row.name: _from_config(row) for row in CORPUS_ROWS}

__all__ = [
    "CORPORA",
    "english",
    "kjv_verses",
    "load_kjv",
    "load_numbers",
    "load_pydoc",
    "load_recall",
    "load_testament",
    "load_unicode",
    "loader_of",
    "spanish",
]
