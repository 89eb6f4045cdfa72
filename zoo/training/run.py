"""One training run from its plan (`zoo.run.preflight.plan_run`: the config validated, the machine checked,
the checkpoint to resume found), as a list of build steps: callbacks, loggers, the Trainer, the
data and the task, fit, and finish (final checkpoints and summary.json, which the experiment
trackers receive before their runs end). Each step is a small function of its own module
beside this one; the run directory's names are `RunDir`'s."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from zoo.config.schema.root import ZooConfig
from zoo.training.build.callbacks import build_callbacks
from zoo.training.build.datamodule import build_data
from zoo.training.build.module import build_task, init_weights
from zoo.training.build.trainer import build_trainer
from zoo.training.distributed.batch_split import split_batch
from zoo.training.finish import RunResult, finish
from zoo.training.fit import fit
from zoo.training.quiet import quiet_lightning
from zoo.training.resume.point import Resume
from zoo.training.start import record_start
from zoo.training.stops import TrainingInterrupted, TrainingStopped
from zoo.training.tracking.identity import closing_trackers
from zoo.training.tracking.loggers import build_loggers

__all__ = ["RunResult", "TrainingInterrupted", "TrainingStopped", "init_weights", "quiet_lightning", "train"]


def train(cfg: DictConfig, spec: ZooConfig, run_dir: Path, resume: Resume) -> RunResult:
    """Train the planned run (`spec`, validated from `cfg`, continuing `resume`); the summary is
    also written to run_dir/summary.json. Python callers use `zoo.train`, which plans first."""
    import lightning as L

    quiet_lightning()
    L.seed_everything(spec.seed, workers=True, verbose=False)
    run_dir.mkdir(parents=True, exist_ok=True)
    callbacks = build_callbacks(spec, run_dir, resume.data_changed)
    # a signal from here to fit (the tokenizer, the data, the model) stops the run at once, with
    # the records of a stop in training; fit then takes the signals over
    with callbacks.interrupt.preparing():
        loggers = build_loggers(spec, cfg, run_dir, resume.step)
        trainer = build_trainer(spec, run_dir, callbacks.all, loggers)
        device_batch = split_batch(spec, trainer)
        datamodule = build_data(spec, device_batch)
        task = build_task(spec, datamodule, resume.path)
        record_start(cfg, spec, run_dir, task, trainer)
        with closing_trackers(loggers) as tracked:  # MLflow / W&B runs end after the summary
            wall = fit(trainer, task, datamodule, callbacks, resume.path)
            result = finish(spec, run_dir, trainer, task, datamodule, callbacks, resume, wall)
            if result.summary is not None:  # a requeued run's trackers go on in its next job
                tracked.record(result.summary.as_dict())
    return result
