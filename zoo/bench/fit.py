"""The same training step inside Lightning's `Trainer.fit`, with the callbacks and logger every
zoo-train run has (CSV metrics, learning-rate monitor, throughput), so the loop's own cost shows
against the bare step. Checkpointing and the progress bar are off (they are not per-step costs
of a run: last.ckpt is written every callbacks.checkpoint_every_n_steps steps)."""

from __future__ import annotations

import tempfile
import time
import warnings

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor

from zoo.bench.timing import synchronize
from zoo.bench.workload import Workload
from zoo.bench.zoo_subject import zoo_task
from zoo.training.monitor.throughput import Throughput
from zoo.training.quiet import quiet_lightning
from zoo.training.tracking.loggers import RunCSVLogger


class _StepClock(L.Callback):
    """Times of the training batch starts: consecutive ones bound one loop iteration."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        synchronize(pl_module.device)
        self.starts.append(time.perf_counter())


class _Repeat:
    """The same batch n times: a loader without data-loading cost, as the bare step has none."""

    def __init__(self, batch: dict, n: int) -> None:
        self.batch, self.n = batch, n

    def __iter__(self):
        return iter([self.batch] * self.n)

    def __len__(self) -> int:
        return self.n


def fit_seconds_per_step(work: Workload, steps: int, *, state: dict | None = None, compile: bool = False) -> float:
    """Median seconds per optimizer step over `steps` steps of one Trainer.fit (after one
    untimed step)."""
    quiet_lightning()
    task = zoo_task(work, {"compile": compile})
    if state is not None:
        task.model.load_state_dict(state)
    batch = work.training_batch()
    clock = _StepClock()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = L.Trainer(
            max_steps=steps + 2,
            accelerator=work.device.type,
            devices=1,
            precision="bf16-mixed" if work.bf16 else "32-true",
            logger=RunCSVLogger(tmp),
            callbacks=[clock, LearningRateMonitor(logging_interval="step"), Throughput()],
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            default_root_dir=tmp,
            log_every_n_steps=1,  # every step logged: the loop's worst case (zoo-train logs every 10)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no validation loader, few batches: expected here
            trainer.fit(task, train_dataloaders=_Repeat(batch, steps + 2))
    starts = clock.starts[1:]  # the first step warms up
    gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
    return gaps[len(gaps) // 2]
