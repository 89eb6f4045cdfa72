"""What zoo-train reads of the Hydra job it runs in, and nothing below zoo/cli and zoo/run does:
the run's directory, whether the job is an arm of a sweep, and the run's origin (`RunOrigin`:
its recipe, overrides, group choices and sweep), which is passed down to the run as data."""

from __future__ import annotations

from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

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
