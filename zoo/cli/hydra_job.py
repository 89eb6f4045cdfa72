"""What zoo-train reads of the Hydra job it runs in, and nothing below zoo/cli and zoo/run does:
the run's directory, whether the job is an arm of a sweep, the run's origin (`RunOrigin`: its
recipe, overrides, group choices and sweep), which is passed down to the run as data, and the
config Hydra composed for the job, which is the one that trains (`composed_by_hydra`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from zoo.config.errors import ZooError
from zoo.config.schema.validate import validate
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
    `.hydra/config.yaml` records is the one that trains. Both come from the same command line;
    the schema is validated again (a check of milliseconds, no composition), and a config that
    validates to another run (one that reads what only Hydra's job knows) is refused on one
    line rather than run unchecked."""
    try:
        spec = validate(cfg)
    except ZooError as exc:
        raise RunRefused(str(exc)) from None
    if spec != claim.spec:
        raise RunRefused(
            "Hydra composed another run than the one zoo-train checked before it started (a value that "
            "reads Hydra's job, ${hydra:...}, outside hydra:?); name the values themselves"
        )
    return replace(claim, cfg=cfg, spec=spec)
