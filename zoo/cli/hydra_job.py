"""What zoo-train reads of the Hydra job it runs in, and nothing below zoo/cli and zoo/run does:
the run's directory, whether the job is an arm of a sweep, the run's origin (`RunOrigin`: its
recipe, overrides, group choices and sweep), which is passed down to the run as data, and the
config Hydra composed for the job, which is the one that trains (`composed_by_hydra`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from zoo.run.preflight import ClaimedRun, RunRefused
from zoo.training.origin import RunOrigin


def job_dir() -> Path:
    """The directory Hydra made for this job (the run's)."""
    return Path(HydraConfig.get().runtime.output_dir)


def in_sweep() -> bool:
    """Whether this job is an arm of a sweep (Hydra's multirun)."""
    return HydraConfig.get().mode == RunMode.MULTIRUN


def run_origin() -> RunOrigin:
    """The origin of the run this Hydra job runs: its recipe (-cn), its overrides, the option of
    each config group, and its sweep's directory when it is an arm of one."""
    hydra = HydraConfig.get()
    choices = {str(group): None if option is None else str(option) for group, option in hydra.runtime.choices.items()}
    return RunOrigin(
        config_name=hydra.job.config_name,
        overrides=tuple(hydra.overrides.task),
        choices=choices,
        sweep_dir=Path(hydra.sweep.dir) if in_sweep() else None,
    )


def composed_by_hydra(claim: ClaimedRun, cfg: DictConfig) -> ClaimedRun:
    """`claim` (made on zoo's composition before Hydra started, so that nothing is written
    before the checks) with the config Hydra composed for its job in place of zoo's: the one
    `.hydra/config.yaml` records is the one that trains. Both come from the same command line
    and are compared as written (milliseconds, no composition and no second validation: the
    claim's `ZooConfig` is the validated form of this text); a composition that differs is
    refused on one line rather than run unchecked. A run with `init_from=hf:DIR` keeps the
    claim's config, whose model and tokenizer were read from DIR once (after the same
    comparison of what was written)."""
    if OmegaConf.select(claim.cfg, "init_from", default=None) is not None:
        written = OmegaConf.to_container(cfg, resolve=False)
        checked = {**written, "model": None, "tokenizer": None} if isinstance(written, dict) else written
        ours = OmegaConf.to_container(claim.cfg, resolve=False)
        same = isinstance(ours, dict) and checked == {**ours, "model": None, "tokenizer": None}
        keep = claim.cfg
    else:
        same = OmegaConf.to_container(cfg, resolve=False) == OmegaConf.to_container(claim.cfg, resolve=False)
        keep = cfg
    if not same:
        raise RunRefused(
            "Hydra composed another config than the one zoo-train checked before it started (a value "
            "that reads Hydra's job, ${hydra:...}?); name the values themselves"
        )
    return replace(claim, cfg=keep)
