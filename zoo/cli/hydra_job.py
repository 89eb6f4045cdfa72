"""zoo-train's Hydra job: how a claimed single run becomes one (`run_claimed`, on the one
composition zoo checked), and what zoo-train reads of the job it runs in, which nothing below
zoo/cli and zoo/run does: the run's directory, whether the job is an arm of a sweep, the run's
origin (`RunOrigin`: its recipe, overrides, group choices and sweep), which is passed down to the
run as data, and the config Hydra composed for the job, which is the one that trains
(`composed_by_hydra`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

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


def runs_as_claimed(cfg: DictConfig) -> bool:
    """Whether the single run composed as `cfg` (with its `hydra:` section) runs as Hydra's job of
    this very composition (`run_claimed`): a run without Hydra callbacks (zoo's own section has
    none; Hydra's runner is what calls them) and without `init_from=hf:DIR` (whose
    `.hydra/config.yaml` records the composition before DIR's model and tokenizer are read in)."""
    return OmegaConf.select(cfg, "init_from", default=None) is None and not OmegaConf.select(
        cfg, "hydra.callbacks", default=None
    )


class _NoCallbacks:
    """The job hooks of a config that names no Hydra callback (`runs_as_claimed`)."""

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        pass

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        pass


def run_claimed(
    cfg: DictConfig,
    run_dir: Path | None,
    task: Callable[[DictConfig], Any],
    *,
    finished: bool,
    primary: str,
    config_dirs: Iterable[str],
) -> Any:
    """The claimed single run as Hydra's job of `cfg`, the composition zoo checked before anything
    was written (with its `hydra:` section): Hydra's `run_job` makes nothing but the claimed
    `run_dir` (None: the one `cfg` names, e.g. a rank's, which its job claims), records `cfg` in `.hydra/` (nothing there for a `finished` run, whose records
    stay), sets up logging as `hydra.main` does and calls `task` with `cfg` less its `hydra:`
    section. What `hydra.main` would add is two more compositions of the same command line: one
    to read the mode, one of the run. Hydra is initialised over the same search path (`primary`,
    `config_dirs`) while the job runs, as inside `hydra.main`. `task`'s return value, or its
    exception raised again."""
    from hydra.core.utils import configure_log, run_job
    from hydra.types import HydraContext

    from zoo.cli.compose import hydra_at

    job = copy.deepcopy(cfg)
    with read_write(job.hydra), open_dict(job.hydra):
        if run_dir is not None:  # None: the directory the composition names (a rank's, its launcher's)
            job.hydra.run.dir = str(run_dir).replace("${", "\\${")  # read back as written, never resolved
        job.hydra.mode = RunMode.RUN
        if finished:  # its record of the command stays
            job.hydra.output_subdir = None
    with hydra_at(primary, config_dirs) as loader:
        configure_log(job.hydra.hydra_logging, job.hydra.verbose)
        hooks = cast(Any, _NoCallbacks())  # Hydra's own Callbacks class is private
        done = run_job(
            task_function=task,
            config=job,
            job_dir_key="hydra.run.dir",
            job_subdir_key=None,
            hydra_context=HydraContext(config_loader=loader, callbacks=hooks),
        )
    return done.return_value  # raises the task's exception, as hydra.main does
