"""Built-in corpora, read offline from installed packages. `CORPORA` maps a `data.source`
name to a loader `(DataConfig) -> datasets.Dataset` (one split; the datamodule holds out
validation)."""

from __future__ import annotations

from zoo.data.corpora.kjv import kjv_verses, load_kjv
from zoo.data.corpora.numbers import english, load_numbers, spanish
from zoo.data.corpora.pydoc import load_pydoc
from zoo.data.corpora.testament import load_testament

CORPORA = {
    "kjv": lambda cfg: load_kjv(),
    "pydoc": lambda cfg: load_pydoc(),
    "numbers": lambda cfg: load_numbers(cfg.num_pairs),
    "testament": lambda cfg: load_testament(),
}

__all__ = [
    "CORPORA",
    "english",
    "kjv_verses",
    "load_kjv",
    "load_numbers",
    "load_pydoc",
    "load_testament",
    "spanish",
]
