"""Which checkpoint a run continues from, and whether the command describes the run it holds.

A run directory that already has checkpoints/last.ckpt is continued by rerunning its command;
`ckpt_path=last` names that file, any other `ckpt_path` a checkpoint elsewhere."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from zoo.config.errors import ConfigError
from zoo.config.records.links import inside
from zoo.config.records.rundir import DamagedRecord, RunDir, RunSummary, locate_checkpoint
from zoo.config.records.yaml_files import UnboundedYaml, load_yaml
from zoo.config.schema.root import ZooConfig
from zoo.training.checkpoint.files import CheckpointError, is_sharded_checkpoint, read_checkpoint
from zoo.training.distributed.fsdp import recover_sharded
from zoo.training.distributed.strategies import is_sharded
from zoo.training.resume.branch import branch_step, check_branch, parent_run
from zoo.training.resume.data_files import check_data_files
from zoo.training.resume.match import check_resume, command_sections, saved_sections, trained_with

log = logging.getLogger("zoo")


@dataclass(frozen=True)
class Resume:
    """The checkpoint a run continues (None: a fresh start) and the step it was saved at."""

    path: str | None = None
    step: int | None = None
    data_changed: tuple[dict, ...] = ()  # data files changed since the run began, accepted on resume
    branched_from: dict | None = None  # branch_from: {"run", "checkpoint", "step"} of the parent


def resolve_resume(ckpt_path: str | None, run_dir: Path) -> str | None:
    """'last' -> the run dir's last.ckpt (must exist); None -> last.ckpt if the run dir already
    has one (rerunning a command in its run dir continues it); a path must exist and be a
    readable checkpoint."""
    last = RunDir(run_dir).last
    if ckpt_path is None:
        path = last if last.exists() else None
    else:
        path = last if ckpt_path == "last" else Path(ckpt_path)
        if not path.exists():
            raise CheckpointError(f"ckpt_path={ckpt_path}: {path} does not exist")
    if path is None:
        return None
    if not is_sharded_checkpoint(path):
        locate_checkpoint(path)  # a pipe, device or socket is named, not read (a read of a pipe blocks)
    read_checkpoint(path, weights=False)  # refuses truncated files and files holding code
    return str(path)


def check_resume_config(resume: str, spec: ZooConfig) -> None:
    """The command must describe the run its checkpoint holds (`zoo.training.resume.match`)."""
    hparams = read_checkpoint(resume, weights=False).get("hyper_parameters", {})
    where = f"the checkpoint {resume}"
    check_resume(saved_sections(trained_with(hparams, where)), command_sections(spec), where)


def check_resume_strategy(resume: str | None, strategy) -> None:
    """A sharded checkpoint (trainer=fsdp) resumes under the sharded strategy only, on any
    number of ranks; a single-file one resumes under any strategy."""
    if resume is not None and is_sharded_checkpoint(resume) and not is_sharded(strategy):
        raise CheckpointError(
            f"{resume} is a sharded checkpoint (written by trainer=fsdp): resume it with trainer=fsdp "
            f"(on any number of devices); zoo-eval, zoo-generate and zoo-export read it on one device"
        )


def _first_process() -> bool:
    """Rank 0, or the process that will start the ranks (no launcher's rank variables)."""
    return all(os.environ.get(v, "0") in ("", "0") for v in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "NODE_RANK"))


def prepare_resume(spec: ZooConfig, run_dir: Path) -> Resume:
    """Put back a sharded checkpoint whose swap was interrupted, then find the checkpoint to
    continue and check that this command (and its strategy) can continue it."""
    if _first_process():
        for note in recover_sharded(RunDir(run_dir).checkpoints):  # before looking for last.ckpt
            log.info("%s", note)
    resume = resolve_resume(spec.ckpt_path, run_dir)
    branched = None
    if spec.branch_from is not None:
        branched = _branch(spec, spec.branch_from, resume is None)
        resume = resume or branched["checkpoint"]  # a rerun of the branch continues its own last.ckpt
    check_resume_strategy(resume, spec.trainer.get("strategy"))
    if resume is None:
        return Resume()
    if branched is None or resume != branched["checkpoint"]:
        check_resume_config(resume, spec)
    saved = read_checkpoint(resume, weights=False)
    changed = check_data_files(saved, f"the checkpoint {resume}", spec.data)
    return Resume(path=resume, step=saved.get("global_step"), data_changed=changed, branched_from=branched)


def _branch(spec: ZooConfig, path: str, starting: bool) -> dict:
    """branch_from's parent (`path`, as given): checked (`zoo.training.resume.branch.check_branch`)
    when the branch starts; named in the record on every leg of the branch."""
    parent = parent_run(path)
    step: int | None
    if starting:
        path = str(locate_checkpoint(Path(path)))  # a run directory names its checkpoint
        read_checkpoint(path, weights=False)  # refuses truncated files and files holding code
        step = check_branch(spec, path, _recorded_trainer(parent))
    else:
        step = branch_step(path) if Path(path).exists() else None
    return {"run": str(parent), "checkpoint": str(path), "step": step}


def already_finished(spec: ZooConfig, run_dir: Path, resume: Resume) -> dict | None:
    """The summary of a finished run that this command would only repeat: the run directory's
    summary.json says finished, with its metrics, at the step of the checkpoint it would resume,
    and the command asks for no more steps (trainer.max_steps) or epochs (trainer.max_epochs)
    than the run had. None otherwise (a fresh run, an unfinished one, or one continued further)."""
    if resume.path is None or resume.step is None:
        return None
    try:
        summary = RunSummary.read(run_dir)
    except (DamagedRecord, OSError):
        return None
    if summary.status != "finished" or not summary.metrics or summary.global_step != resume.step:
        return None
    max_steps = spec.trainer.get("max_steps", -1)
    if isinstance(max_steps, int) and max_steps > 0:
        return summary.as_dict() if resume.step >= max_steps else None
    recorded = _recorded_trainer(run_dir).get("max_epochs")
    wanted = spec.trainer.get("max_epochs")
    if recorded is not None and wanted is not None and wanted <= recorded:
        return summary.as_dict()
    return None


def _recorded_trainer(run_dir: Path) -> dict:
    """The trainer section of the run's own config.yaml ({} where it cannot be read; refused where it
    holds a YAML alias, whose expansion would not end, is a link out of the run, or is not a
    regular file: a pipe would block the read)."""
    from omegaconf import OmegaConf

    config = inside(RunDir(run_dir).config, run_dir)  # LinkedOut, one line, for a link out of the run
    if config.exists() and not config.is_file():
        raise ConfigError(
            f"{config} is not a regular file (a pipe, device or directory); zoo reads a run's config.yaml only as a file"
        )
    try:
        whole = OmegaConf.to_container(load_yaml(config))
    except UnboundedYaml:  # an alias bomb: refused, as reading it would never end
        raise
    except Exception:  # noqa: BLE001 - a missing or damaged config.yaml: nothing to compare with
        return {}
    trainer = whole.get("trainer", {}) if isinstance(whole, dict) else {}
    return trainer if isinstance(trainer, dict) else {}
