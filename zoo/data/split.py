"""The seeded train/validation split, for sources that bring no validation split."""

from __future__ import annotations

import math

from zoo.data.errors import DataError
from zoo.data.integrity import cache_files, checked


def split_train_val(ds, val_fraction: float, seed: int):
    """`datasets.DatasetDict` with "train" and "validation": a shuffle seeded by `seed`, then
    ceil(val_fraction * N) examples held out. Same seed -> same split; the two never share an
    example (row)."""
    from datasets import DatasetDict

    n = len(ds)
    if n < 2:
        raise DataError(
            f"cannot hold out validation examples from {n} example(s); give at "
            f"least 2, or a validation file with data.val_path="
        )
    n_val = math.ceil(val_fraction * n)
    if n_val >= n:
        raise DataError(
            f"data.val_fraction={val_fraction} of {n} examples leaves none to train on; lower data.val_fraction"
        )
    parts = checked(
        lambda fresh: ds.train_test_split(test_size=n_val, seed=seed, shuffle=True, load_from_cache_file=not fresh),
        "the train/validation split",
        _split_files,
    )
    return DatasetDict(train=parts["train"], validation=parts["test"])


def _split_files(parts) -> list[str]:
    return [f for name in ("train", "test") for f in cache_files(parts[name])]
