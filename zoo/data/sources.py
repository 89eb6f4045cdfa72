"""`load_splits`: the train and validation examples a `DataConfig` names, as one
`datasets.DatasetDict` (raw text columns, not yet tokenized)."""

from __future__ import annotations

import hashlib
import json
import math

from zoo.config.facts.corpora import PYTHON, CorpusRow, corpus_row
from zoo.config.schema.data import DataConfig, DataSource
from zoo.data.cache import cache_root
from zoo.data.corpora import CORPORA
from zoo.data.errors import DataError
from zoo.data.files import load_files, load_hub, resolve_files
from zoo.data.integrity import remembered_digest
from zoo.data.split import split_train_val


def load_splits(cfg: DataConfig):
    """DatasetDict(train=..., validation=...).

    Built-in corpora and local files without `data.val_path` are split by
    `split_train_val(val_fraction, split_seed)`; a Hub dataset keeps its own validation split
    when it has one. `data.max_examples` then keeps the first N training examples (a seeded
    random sample when the split shuffled) and ceil(N * val_fraction) validation examples."""
    from datasets import DatasetDict

    datasets_cache = str(cache_root(cfg.cache_dir) / "datasets")
    val = None
    if cfg.source == DataSource.local:
        train = load_files(cfg.path, sample_by=cfg.sample_by.value, cache_dir=datasets_cache)
        if cfg.val_path is not None:
            val = load_files(cfg.val_path, sample_by=cfg.sample_by.value, cache_dir=datasets_cache, key="data.val_path")
    elif cfg.source == DataSource.hub:
        assert cfg.hub_name is not None  # DataConfig refuses source hub without one
        train, val = load_hub(cfg.hub_name, cfg.hub_config, cache_dir=datasets_cache)
    else:
        train = CORPORA[cfg.source.value](cfg)
    if val is None:
        splits = split_train_val(train, cfg.val_fraction, cfg.split_seed)
    else:
        splits = DatasetDict(train=train, validation=val)
    # nested columns become dotted ones, e.g. WMT's {"translation": {"de", "en"}} ->
    # "translation.de", "translation.en", so data.text_column can name them
    splits = splits.flatten()
    if cfg.max_examples is not None:
        n_val = max(1, math.ceil(cfg.max_examples * cfg.val_fraction))
        splits = DatasetDict(
            train=_head(splits["train"], cfg.max_examples),
            validation=_head(splits["validation"], n_val),
        )
    return splits


# bump when the way a source becomes examples changes (e.g. which lines are dropped), so that
# corpora prepared before are prepared again
LOADER_VERSION = 1


def corpus_key(cfg: DataConfig) -> str | None:
    """A digest of everything the train / validation examples depend on, known without loading
    them: the content of local files (each read in full once, then remembered by size and
    modification time), a built-in corpus's name and settings, the split and `max_examples`.
    None for Hub datasets, whose content is known only once loaded."""
    if cfg.source == DataSource.hub:
        return None
    store = cache_root(cfg.cache_dir) / "prepared" / "file-digests.json"
    parts: dict = {
        "loader": LOADER_VERSION,
        "source": cfg.source.value,
        "max_examples": cfg.max_examples,
        "val_fraction": cfg.val_fraction,
        "split_seed": cfg.split_seed,
    }
    if cfg.source == DataSource.local:
        parts["sample_by"] = cfg.sample_by.value
        parts["files"] = [remembered_digest(f, store) for f in resolve_files(cfg.path)]
        if cfg.val_path is not None:
            parts["val_files"] = [remembered_digest(f, store) for f in resolve_files(cfg.val_path, "data.val_path")]
    else:  # a built-in corpus: what it is read from
        row = corpus_row(cfg.source.value)
        parts["provider"] = _provider(row)
        parts.update({name: getattr(cfg, name) for name in row.settings})
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _provider(row: CorpusRow) -> str:
    """The package (and version) a built-in corpus is read from."""
    import sys
    from importlib.metadata import PackageNotFoundError, version

    if row.package == PYTHON:  # the running Python's standard library
        return f"python {sys.version.split()[0]}"
    try:
        return f"{row.package} {version(row.package)}"
    except PackageNotFoundError:
        return row.package


def require_columns(ds, columns: dict[str, str], where: str) -> None:
    """Raise DataError naming the config key and the columns that exist when one of
    `columns` ({config key: column name}) is absent from `ds`."""
    for key, column in columns.items():
        if column not in ds.column_names:
            raise DataError(f"{key}={column!r} is not a column of {where}; columns: {', '.join(ds.column_names)}")


def describe(cfg: DataConfig) -> str:
    """Where the examples come from, for error messages."""
    if cfg.source == DataSource.local:
        return f"data.path={cfg.path}"
    if cfg.source == DataSource.hub:
        return f"data.hub_name={cfg.hub_name}"
    return f"data.source={cfg.source.value}"


def _head(ds, n: int):
    return ds.select(range(min(n, len(ds))))
