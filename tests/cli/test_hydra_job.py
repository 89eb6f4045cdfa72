"""The config that trains a run zoo-train claimed before Hydra started is the one Hydra composed
for its job (`composed_by_hydra`): validated again, and refused on one line when it would be
another config than the one checked; the run zoo-train claimed runs as Hydra's job of that one
composition (`run_claimed`)."""

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


def _run_as_claimed(run_dir, *, finished=False):
    """`run_claimed` over zoo's composition of the tiny run, its task keeping what it was given
    and what Hydra's job said of itself."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from zoo.cli.hydra_job import job_dir, run_claimed, runs_as_claimed
    from zoo.config.paths import config_source

    composed = compose(tiny_overrides(), return_hydra_config=True, check=False)
    assert runs_as_claimed(composed)
    seen = {}

    def task(cfg):
        seen["cfg"] = OmegaConf.to_container(cfg, resolve=False)
        seen["dir"], seen["mode"] = job_dir(), HydraConfig.get().mode
        return "done"

    result = run_claimed(composed, run_dir, task, finished=finished, primary=config_source(), config_dirs=[])
    job = OmegaConf.to_container(composed, resolve=False)
    del job["hydra"]
    return result, seen, job


def test_the_claimed_run_trains_the_composition_hydra_records(tmp_path):
    """One composition: the config zoo checked is the one the job is given and the one
    `.hydra/config.yaml` records (and overrides.yaml the command line's overrides)."""
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    run = tmp_path / "run"
    result, seen, job = _run_as_claimed(run)
    assert result == "done" and seen["cfg"] == job
    assert OmegaConf.to_container(OmegaConf.load(run / ".hydra" / "config.yaml"), resolve=False) == job
    assert OmegaConf.to_container(OmegaConf.load(run / ".hydra" / "overrides.yaml")) == tiny_overrides()
    assert seen["dir"] == run.resolve() and seen["mode"] == RunMode.RUN


def test_a_finished_runs_records_stay_as_they_are(tmp_path):
    run = tmp_path / "run"
    result, seen, job = _run_as_claimed(run, finished=True)
    assert result == "done" and seen["cfg"] == job
    assert not (run / ".hydra").exists()


def test_a_run_with_init_from_or_hydra_callbacks_runs_through_hydra_main():
    from omegaconf import OmegaConf, open_dict

    from zoo.cli.hydra_job import runs_as_claimed

    composed = compose(tiny_overrides(), return_hydra_config=True, check=False)
    with_init = composed.copy()
    with open_dict(with_init):
        with_init.init_from = "hf:some/dir"
    assert not runs_as_claimed(with_init)
    hooked = OmegaConf.create(OmegaConf.to_container(composed, resolve=False))
    hooked.hydra.callbacks = {"log": {"_target_": "hydra.experimental.callbacks.LogJobReturnCallback"}}
    assert not runs_as_claimed(hooked)
