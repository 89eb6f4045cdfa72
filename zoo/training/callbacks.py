"""The callbacks of a run, and handles on the ones `fit_run` consults after fit.

`LastValidation` remembers whether the last step of a run was validated, so that `fit` validates
it when the validation interval did not land on it."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.plugins.environments import SLURMEnvironment

from zoo.config.errors import ConfigError
from zoo.config.facts.positions import max_positions
from zoo.config.facts.tasks import task_names, task_spec
from zoo.config.records.rundir import RunDir
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.train import ProgressBar
from zoo.harness.run import require_lm_eval
from zoo.training.checkpoint.saving import LastCheckpoint, RunRecord
from zoo.training.checkpoint.validation_due import ValidationDue
from zoo.training.distributed.rank_watch import RankWatch
from zoo.training.ema import WeightAverage
from zoo.training.monitor.instability import InstabilityMonitor
from zoo.training.monitor.progress import StepRichProgressBar, StepTQDMProgressBar
from zoo.training.monitor.routing import RoutingMonitor
from zoo.training.monitor.throughput import Throughput
from zoo.training.resume.data_files import DataFilesRecord
from zoo.training.resume.rng import RngState
from zoo.training.signals.interrupt import Interrupt
from zoo.training.signals.preemption import Requeue, in_slurm_job


@dataclass
class RunCallbacks:
    """`all` in the order Lightning calls them; the others are members of `all`."""

    all: list
    last: LastCheckpoint
    interrupt: Interrupt
    throughput: Throughput
    final: LastValidation
    requeue: Requeue | None = None  # SLURM jobs with callbacks.requeue_signal
    rank_watch: RankWatch | None = None  # names a rank that died
    instability: InstabilityMonitor | None = None  # callbacks.instability_every
    routing: RoutingMonitor | None = None  # callbacks.routing_every, with model.ffn=moe
    downstream: Any | None = None  # callbacks.downstream: a `Downstream`
    ema: WeightAverage | None = None  # optim.ema: the weights' average

    @property
    def requeued(self) -> bool:
        """SLURM's warning came: last.ckpt is saved and the job requeued."""
        return self.requeue is not None and self.requeue.requeued


def build_callbacks(spec: ZooConfig, run_dir: Path, data_changed: tuple[dict, ...] = ()) -> RunCallbacks:
    """Checkpoints (best by val/loss, last.ckpt every N steps), the RNG state, the run's identity,
    signals, the learning rate, throughput, a final validation, the instability monitor when
    asked for, SLURM's requeue and a progress bar."""
    ckpt_dir = RunDir(run_dir).checkpoints
    last = LastCheckpoint(ckpt_dir, spec.callbacks.checkpoint_every_n_steps)
    # a validation due at a checkpoint's step runs on resume (and a stop inside one saves as of its start)
    due = ValidationDue(RunDir(run_dir).metrics)
    interrupt = Interrupt(last, grace_s=spec.callbacks.stop_grace_s, due=due)  # SIGTERM / SIGINT: save, stop
    throughput, final = Throughput(), LastValidation()
    rank_watch = RankWatch(run_dir, stale_s=spec.callbacks.rank_silence_s)
    # task scores of a step are taken before that step's last.ckpt, which then holds them
    downstream = _downstream(spec)
    callbacks = [
        # top-k by validation loss, checked after every validation
        ModelCheckpoint(
            dirpath=ckpt_dir,
            filename=RunDir.BEST,
            monitor="val/loss",
            mode="min",
            save_top_k=spec.callbacks.save_top_k,
            auto_insert_metric_name=False,
        ),
        *([downstream] if downstream is not None else []),
        last,  # last.ckpt every N optimizer steps and at every epoch end (and when fit ends)
        due,
        RngState(),
        RunRecord(run_dir),
        DataFilesRecord(spec.data, data_changed),  # what the data files held, and the changes accepted on resume
        interrupt,
        rank_watch,  # the death of one rank ends every rank, with failed.json naming it
        LearningRateMonitor(logging_interval="step"),
        throughput,
        final,
    ]
    instability = None
    if spec.callbacks.instability_every:  # off: no callback, no hook
        instability = InstabilityMonitor(spec.callbacks.instability_every)
        callbacks.append(instability)
    routing = None
    if spec.callbacks.routing_every and spec.model.ffn == "moe":  # a dense model has no routing to log
        routing = RoutingMonitor(spec.callbacks.routing_every)
        callbacks.append(routing)
    ema, o = None, spec.optim
    if o.ema is not None:  # first: a checkpoint of step s holds the average of step s
        ema = WeightAverage(o.ema, every=o.ema_every, warmup=o.ema_warmup, evaluate=o.ema_eval)
        callbacks.insert(0, ema)
    requeue = None
    # zoo saves and requeues itself (Requeue); Lightning's handler would save from inside the
    # signal handler (its SLURM environment is added without it, `zoo.training.parts.build_trainer`)
    if SLURMEnvironment.detect() and spec.callbacks.requeue_signal and in_slurm_job():
        requeue = Requeue(last, signum=getattr(signal, spec.callbacks.requeue_signal))
        callbacks.append(requeue)
    if spec.callbacks.progress_bar == ProgressBar.rich:
        callbacks.append(StepRichProgressBar(leave=True))
    elif spec.callbacks.progress_bar == ProgressBar.tqdm:
        callbacks.append(StepTQDMProgressBar())
    return RunCallbacks(
        all=callbacks,
        last=last,
        interrupt=interrupt,
        throughput=throughput,
        final=final,
        requeue=requeue,
        rank_watch=rank_watch,
        instability=instability,
        routing=routing,
        downstream=downstream,
        ema=ema,
    )


def _downstream(spec: ZooConfig):
    """The `Downstream` callback of callbacks.downstream (None when it is empty): the harness
    must be installed, the task must have a decoder, every task must be known and load (its
    dataset read), a generating task must fit in the model's positions; each refused on one
    line before any weight exists. Imported here only: lm-evaluation-harness is
    an optional extra."""
    if not spec.callbacks.downstream:
        return None
    if not task_spec(spec.task.kind).generates:
        raise ConfigError(
            f"callbacks.downstream scores continuations; task={spec.task.kind.value} has no decoder "
            f"(use it with {task_names(lambda spec: spec.generates)})"
        )
    require_lm_eval()
    from zoo.training.monitor.downstream import Downstream

    return Downstream(
        list(spec.callbacks.downstream),
        every=spec.callbacks.downstream_every,
        limit=spec.callbacks.downstream_limit,
        batch_size=16,
        positions=max_positions(spec.model),
    )


class LastValidation(L.Callback):
    """Remembers the step of the last validation and the step training started from, so that a
    run whose last step is not a validation step (a run shorter than `val_check_interval`, or
    an epoch-based interval longer than the run) still validates at its end."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.started_at: int | None = None

    def on_train_start(self, trainer, pl_module):
        self.started_at = trainer.global_step

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.step = trainer.global_step

    def needed(self, trainer) -> bool:
        """The last step has not been validated by this process: it trained past the last
        validation, or it resumed a checkpoint at the run's end and trained nothing (its summary
        must still report the weights it ends with, not an empty set of metrics)."""
        return self.step != trainer.global_step and trainer.limit_val_batches != 0
