"""The config that trains a run zoo-train claimed before Hydra started is the one Hydra composed
for its job (`composed_by_hydra`): validated again, and refused on one line when it would be
another config than the one checked."""

from __future__ import annotations

import pytest

from tests.cli.conftest import tiny_overrides
from zoo.cli.compose import compose
from zoo.cli.hydra_job import composed_by_hydra
from zoo.run.preflight import RunRefused, claim_run


@pytest.fixture
def claimed(tmp_path):
    claim = claim_run(compose(tiny_overrides()), tmp_path / "run")
    yield claim
    claim.give_back()


def test_the_claim_trains_hydras_composition(claimed):
    hydras = compose(tiny_overrides())  # the same command line, composed again (as Hydra does)
    trained = composed_by_hydra(claimed, hydras)
    assert trained.cfg is hydras and trained.spec is claimed.spec  # validated once, by the claim
    assert (trained.run_dir, trained.resume, trained.locked) == (claimed.run_dir, claimed.resume, claimed.locked)


def test_a_composition_that_is_another_run_is_refused(claimed):
    for other in ("seed=7", "model.n_heads=4", "trainer.max_steps=${data.seq_len}"):
        with pytest.raises(RunRefused, match="Hydra composed another config than the one zoo-train checked"):
            composed_by_hydra(claimed, compose([*tiny_overrides(), other]))
