"""The seeded train/validation split."""

import pytest
from datasets import Dataset

from zoo.data import DataError, split_train_val


def _ds(n=1000):
    return Dataset.from_dict({"text": [f"example {i}" for i in range(n)]})


def test_same_seed_same_split_different_seed_different_split():
    a = split_train_val(_ds(), 0.1, seed=0)
    b = split_train_val(_ds(), 0.1, seed=0)
    c = split_train_val(_ds(), 0.1, seed=1)
    assert a["validation"]["text"] == b["validation"]["text"]
    assert a["train"]["text"] == b["train"]["text"]
    assert set(a["validation"]["text"]) != set(c["validation"]["text"])


def test_split_is_disjoint_and_complete():
    s = split_train_val(_ds(), 0.05, seed=3)
    train, val = set(s["train"]["text"]), set(s["validation"]["text"])
    assert len(val) == 50 and len(train) == 950
    assert not train & val and len(train | val) == 1000


def test_split_needs_two_examples():
    with pytest.raises(DataError, match="at least 2"):
        split_train_val(_ds(1), 0.1, seed=0)
    with pytest.raises(DataError, match="val_fraction"):
        split_train_val(_ds(2), 0.9, seed=0)
