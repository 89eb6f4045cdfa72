"""data.order_seed: the training data order follows its own seed when set, the run's seed when
unset (every run made before it existed keeps its order), and the init seed alone no longer
moves the order once it is set."""

from __future__ import annotations

import torch

import zoo
from zoo.config.schema.validate import validate
from zoo.training.parts import build_data


def _first_batch(cache, *overrides: str) -> torch.Tensor:
    spec = validate(
        zoo.compose(
            [
                "data=numbers",
                "tokenizer=byte",
                "model.max_seq_len=64",
                "data.seq_len=32",
                "data.global_batch_size=4",
                f"data.cache_dir={cache}",
                *overrides,
            ]
        )
    )
    return next(iter(build_data(spec, 4).train_dataloader()))["input_ids"]


def test_the_data_order_follows_its_own_seed_and_the_seed_when_unset(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ZOO_CACHE", str(cache))
    unset = _first_batch(cache, "seed=0")
    assert torch.equal(unset, _first_batch(cache, "seed=0", "data.order_seed=0"))  # unset: as before
    assert not torch.equal(unset, _first_batch(cache, "seed=0", "data.order_seed=1"))
    assert not torch.equal(unset, _first_batch(cache, "seed=5"))  # unset: the seed moves the order
    assert torch.equal(unset, _first_batch(cache, "seed=5", "data.order_seed=0"))  # set: it alone does
