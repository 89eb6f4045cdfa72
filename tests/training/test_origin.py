"""A run's origin (`RunOrigin`) as data: checked as it is made, frozen, and read by the records
that name the run (the `composed from:` line, the trackers' identity) without Hydra running."""

from __future__ import annotations

from pathlib import Path

import pytest

from zoo.training.origin import RunOrigin
from zoo.training.start import composed_from
from zoo.training.tracking.identity import run_identity


def test_an_origin_is_checked_and_frozen():
    origin = RunOrigin("quick", ["model=llama"], {"model": "llama"}, "multirun/x")
    assert origin.overrides == ("model=llama",) and origin.sweep_dir == Path("multirun/x") and origin.in_sweep
    with pytest.raises(TypeError):
        origin.choices["model"] = "gpt"  # type: ignore[index]
    with pytest.raises(AttributeError):
        origin.config_name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="overrides are text"):
        RunOrigin(overrides=(1,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a recipe's name or None"):
        RunOrigin(config_name="")


def test_composed_from_reads_the_origin_it_is_given():
    origin = RunOrigin(
        config_name="config",
        overrides=("model=llama", "seed=1"),
        choices={"model": "llama", "task": "causal_lm", "tokenizer": "byte", "hydra/launcher": "basic"},
    )
    line = composed_from(origin)
    assert line == "model=llama task=causal_lm (default) tokenizer=byte (default)", line
    assert composed_from(RunOrigin()) == ""  # composed in Python: no choices known


def test_an_arm_of_a_sweep_is_named_by_its_origin(tmp_path):
    single = run_identity(tmp_path / "run", 3, RunOrigin(overrides=("model.norm=post", "seed=3")))
    assert (single.sweep, single.arm, single.seed) == (None, "model.norm=post", 3)
    sweep = tmp_path / "sweep"
    arm = run_identity(sweep / "0", 1, RunOrigin(overrides=("model.norm=post", "seed=1"), sweep_dir=sweep))
    assert arm.sweep == str(sweep.resolve()) and arm.arm == "model.norm=post"  # no multirun.yaml: every override
