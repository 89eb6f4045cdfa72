"""A WSD cooldown branched from a stable run's checkpoint, in a run directory of its own.

`zoo-train branch_from=RUN/checkpoints/last.ckpt scheduler=wsd scheduler.decay_steps=M
trainer.max_steps='${zoo.branch_end:}'` continues the checkpoint of step N (its weights,
optimizer state, data position, random streams and step) as a new run whose schedule cools down
from step N over M steps: the weights it ends with are those of a run configured from the start
to decay at step N over M steps (Hägele et al. 2024, the reason WSD is used in scaling studies).
A sweep over decay_steps (`-m scheduler.decay_steps=a,b,c`) gives one run directory per length,
each an ordinary run that zoo-compare reads.

It is refused, on one line, where it would not be that run: a section other than the schedule
differs from the checkpoint's, the command's schedule and the parent's disagree at a step up to N
(the checkpoint is past the parent's stable phase, or the warmup differs), or the run does not
end where its cooldown does. The branch's own run directory must be new (or hold the branch
itself, which a rerun continues from its own last.ckpt, as any run)."""

from __future__ import annotations

import os
from pathlib import Path

from zoo.config.errors import ConfigError
from zoo.config.facts.schedules import SCHEDULE_FACTS
from zoo.config.records.rundir import RunDir
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.train import SchedulerConfig
from zoo.tasks.optim import schedule
from zoo.training.checkpoint.files import CheckpointError, is_sharded_checkpoint, read_checkpoint
from zoo.training.resume.match import check_resume, command_sections, saved_sections, trained_with

MOST_COMPARED_STEPS = 10**7  # a branch step past this is compared at its warmup's end and at N only


def branch_step(path: str) -> int:
    """The optimizer step the checkpoint at `path` was saved at (refused if it has none)."""
    if not Path(path).exists():
        raise CheckpointError(f"branch_from={path}: no such checkpoint")
    step = read_checkpoint(path, weights=False).get("global_step")
    if not isinstance(step, int) or step < 1:
        raise CheckpointError(f"branch_from={path}: the checkpoint holds no optimizer step to branch from")
    return step


def parent_run(path: str) -> Path:
    """The run directory `branch_from` names: RUN itself, or the run of RUN/checkpoints or of
    RUN/checkpoints/FILE (a file or a sharded directory). Taken from the path as given, made
    absolute but not resolved through links: what is read of the run is read inside it
    (RUN/checkpoints/last.ckpt, a link elsewhere, still names RUN)."""
    given = Path(os.path.abspath(path))
    if given.is_dir() and not is_sharded_checkpoint(given):
        return given.parent if given.name == RunDir.CHECKPOINTS else given
    return given.parent.parent


def _multipliers(cfg: SchedulerConfig, total: int | None, d_model: int, steps) -> list[float]:
    f = schedule(cfg, total_steps=total, d_model=d_model)
    return [f(step) for step in steps]


def check_branch(spec: ZooConfig, path: str, parent_trainer: dict) -> int:
    """Refuse a branch that would not be the run configured to cool down at its step; returns
    that step N. `parent_trainer`: the trainer section of the parent run's config.yaml ({} if
    unread)."""
    step = branch_step(path)
    hparams = read_checkpoint(path, weights=False).get("hyper_parameters", {})
    where = f"branch_from's checkpoint {path}"
    trained = trained_with(hparams, where)
    saved = saved_sections(trained)
    check_resume(
        {k: v for k, v in saved.items() if k != "scheduler"},
        {k: v for k, v in command_sections(spec).items() if k != "scheduler"},
        where,
    )
    decay = spec.scheduler.decay_steps
    assert decay is not None  # ZooConfig refuses a branch_from without it (zoo.config.schema.validate)
    end = spec.trainer.get("max_steps")
    total = spec.scheduler.total_steps
    if total is None:
        if end != step + decay:
            raise ConfigError(
                f"a branch from step {step} with scheduler.decay_steps={decay} cools down until step "
                f"{step + decay}: set trainer.max_steps={step + decay} (or trainer.max_steps="
                f"'${{zoo.branch_end:}}'), got {end}"
            )
        total = step + decay  # trainer.max_steps, as it was just checked to be
    if total - decay != step:
        raise ConfigError(
            f"the branch's cooldown would begin at step {total - decay}, not at the branch step "
            f"{step}: set scheduler.total_steps={step + decay} or leave it null"
        )
    parent = trained.scheduler
    parent_total = parent.total_steps or parent_trainer.get("max_steps")
    d_model = spec.model.base_d_model
    steps = range(step + 1) if step < MOST_COMPARED_STEPS else (0, spec.scheduler.warmup_steps, step)
    try:
        theirs = _multipliers(
            parent, parent_total if isinstance(parent_total, int) and parent_total > 0 else None, d_model, steps
        )
    except ConfigError:
        raise ConfigError(
            f"branch_from={path}: cannot tell the parent's schedule (scheduler={parent.kind.value} "
            f"needs its run's trainer.max_steps, and {parent_run(path)}/config.yaml does not say it)"
        ) from None
    mine = _multipliers(spec.scheduler, total, d_model, steps)
    for at, (a, b) in zip(steps, zip(theirs, mine)):
        if a != b:
            what = (
                "the checkpoint is past the parent's stable phase"
                if SCHEDULE_FACTS[parent.kind].needs_total and at >= spec.scheduler.warmup_steps
                else "the warmups differ"
            )
            raise ConfigError(
                f"branch_from={path}: the parent's learning rate at step {at} is {a:g} x optim.lr, "
                f"the branch's {b:g} x ({what}); branch from a checkpoint of the stable phase, "
                f"e.g. of a run with scheduler=wsd scheduler.decay_steps=0"
            )
    return step


__all__ = ["branch_step", "check_branch", "parent_run"]
