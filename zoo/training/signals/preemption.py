"""Preemption under SLURM: save `last.ckpt` when the scheduler warns, then requeue.

SLURM sends a signal some time before a job's time limit or preemption when asked to
(`#SBATCH --signal=USR2@120`; `hydra/launcher=slurm` asks for it). The handler only records
that the signal came; at the next optimizer-step boundary all ranks agree on it (one small
all-reduce per step, only in SLURM jobs), save `last.ckpt` together, and rank 0 calls
`scontrol requeue` on its job. The requeued job runs the same command in the same run
directory and resumes from that checkpoint.

This replaces Lightning's own SLURM auto-requeue (whose signal handler saves a checkpoint
from inside the handler, at whatever point each rank happens to be)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Callable
from types import FrameType
from typing import Any

import lightning as L

from zoo.training.checkpoint.saving import at_step_boundary

log = logging.getLogger("zoo")


def slurm_job_id() -> str | None:
    """The id `scontrol requeue` needs: ARRAYJOB_TASK for array jobs, else the job id."""
    array_job, array_task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and array_task:
        return f"{array_job}_{array_task}"
    return os.environ.get("SLURM_JOB_ID")


def in_slurm_job() -> bool:
    return slurm_job_id() is not None and os.environ.get("SLURM_JOB_NAME") not in ("bash", "interactive")


class Requeue(L.Callback):
    """On `signum` (default SIGUSR2): save `last` (a LastCheckpoint), requeue, stop."""

    def __init__(self, last, signum: int = signal.SIGUSR2, requeue: bool = True) -> None:
        self.last = last
        self.signum = signum
        self.requeue = requeue
        self.received = False
        self.requeued = False  # set once the run stopped to be requeued
        self._previous: Callable[[int, FrameType | None], Any] | int | None = None  # the handler before fit

    def _handler(self, signum, frame) -> None:
        self.received = True

    def on_fit_start(self, trainer, pl_module) -> None:
        self._previous = signal.signal(self.signum, self._handler)

    def on_fit_end(self, trainer, pl_module) -> None:
        if self._previous is not None:
            signal.signal(self.signum, self._previous)
            self._previous = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.on_fit_end(trainer, pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not at_step_boundary(trainer):
            return
        if not trainer.strategy.reduce_boolean_decision(self.received, all=False):  # any rank
            return
        log.info(
            "signal %s: saving %s at step %d and requeueing",
            signal.Signals(self.signum).name,
            self.last.path,
            trainer.global_step,
        )
        self.last.save(trainer)
        self.received = False
        ok = True
        if trainer.is_global_zero and self.requeue:
            job = slurm_job_id()
            assert job is not None  # Requeue is made in a SLURM job only (zoo.training.callbacks)
            result = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
            ok = result.returncode == 0
            if ok:
                log.info("requeued SLURM job %s", job)
            else:
                log.error(
                    "scontrol requeue %s failed (%s); training goes on until the job ends", job, result.stderr.strip()
                )
        if trainer.strategy.reduce_boolean_decision(ok, all=True) and self.requeue:
            trainer.should_stop = True  # SLURM ends this job and starts it again
            self.requeued = True
