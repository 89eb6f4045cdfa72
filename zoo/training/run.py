"""One training run from a composed config, as a list of build steps: validate the config and
the machine, find the checkpoint to resume, build callbacks, loggers, the Trainer, the data
and the task, fit, and finish (final checkpoints and summary.json, which the experiment
trackers receive before their runs end). Each step is a small
function of its own module beside this one; the run directory's names are `RunDir`'s."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from zoo.config.validate import validate
from zoo.interop.hf.init_from import apply_init_from
from zoo.training.finish import finish, RunResult
from zoo.training.machine import check_machine
from zoo.training.quiet import quiet_lightning
from zoo.training.resume import already_finished, check_resume_config, prepare_resume, resolve_resume
from zoo.training.stops import TrainingInterrupted, TrainingStopped
from zoo.training.task import build_task, init_weights
from zoo.training.batch_split import split_batch
from zoo.training.data import build_data
from zoo.training.fit import fit
from zoo.training.loggers import build_loggers
from zoo.training.run_callbacks import build_callbacks
from zoo.training.start import record_start
from zoo.training.trainer import build_trainer
from zoo.training.tracking import closing_trackers

log = logging.getLogger("zoo")

__all__ = ["RunResult", "TrainingInterrupted", "TrainingStopped", "check_machine", "check_resume_config",
           "command_line_overrides", "init_weights", "quiet_lightning", "resolve_resume", "train"]


def command_line_overrides() -> list[str]:
    """The overrides of the running Hydra job (`zoo-train a=b ...`); none outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def train(cfg: DictConfig, run_dir: Path) -> RunResult:
    """Run training; the summary is also written to run_dir/summary.json."""
    import lightning as L

    cfg = apply_init_from(cfg, command_line_overrides())  # init_from=hf:DIR: DIR's model and tokenizer
    spec = validate(cfg)
    check_machine(spec)
    resume = prepare_resume(spec, run_dir)
    done = already_finished(spec, run_dir, resume)
    if done is not None:  # the same command again: the run and its records are left as they are
        log.info("%s is already finished at step %d; nothing to do (raise trainer.max_steps to train on)",
                 run_dir, resume.step)
        return RunResult(summary=done, task=None, already_finished=True)
    quiet_lightning()
    L.seed_everything(spec.seed, workers=True, verbose=False)
    run_dir.mkdir(parents=True, exist_ok=True)
    callbacks = build_callbacks(spec, run_dir)
    loggers = build_loggers(spec, cfg, run_dir, resume.step)
    trainer = build_trainer(spec, run_dir, callbacks.all, loggers)
    device_batch = split_batch(spec, trainer)
    datamodule = build_data(spec, device_batch)
    task = build_task(spec, datamodule, resume.path)
    record_start(cfg, spec, run_dir, task, trainer)
    with closing_trackers(loggers) as tracked:  # MLflow / W&B runs end after the summary
        wall = fit(trainer, task, datamodule, callbacks, resume.path)
        result = finish(spec, run_dir, trainer, task, datamodule, callbacks, resume, wall)
        tracked.record(result.summary)
    return result
