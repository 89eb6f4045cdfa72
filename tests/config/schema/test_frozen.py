"""The validated config is frozen: what training, tasks, resume and checkpoints receive is the
config the run was checked with. Its schema still takes overrides when Hydra composes it."""

from __future__ import annotations

import dataclasses

import pytest

import zoo
from zoo.config.schema.validate import validate


def test_the_validated_config_cannot_be_changed_and_its_composition_can():
    cfg = zoo.compose(["seed=3", "model.d_model=32", "trainer.max_steps=100"])
    spec = validate(cfg)
    assert spec.seed == 3 and spec.model.d_model == 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.ckpt_path = "last"  # type: ignore[misc]
    assert dataclasses.replace(spec, seed=4).seed == 4 and spec.seed == 3
