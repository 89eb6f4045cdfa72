"""Checkpoints that survive kills: atomic writes, `last.ckpt` every N steps and at every epoch
end, and the run's identity inside each file.

A checkpoint is first written to a hidden temporary file next to its target, flushed to disk,
then renamed over the target (`os.replace` is atomic on POSIX file systems). A process killed
while saving leaves the previous file intact and, at worst, a `.NAME.tmp-PID` file that the next
run of the same directory removes."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from zoo.config.records.rundir import RunDir
from zoo.data.integrity import fsync_dir
from zoo.training.checkpoint.files import read_checkpoint
from zoo.training.checkpoint.integrity import with_record

log = logging.getLogger("zoo")

TMP_MARK = ".tmp-"


def atomic_save(obj: Any, path: str | Path) -> None:
    """torch.save to `path` so that readers see the old file or the new one, never a part. A
    checkpoint (a dict) carries the record of the checks it is written for (`with_record`)."""
    path = Path(path)
    if isinstance(obj, dict):
        obj = with_record(obj)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)  # make the rename itself durable


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Delete `.NAME.tmp-PID` files left by a process killed while saving."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    stale = [p for p in directory.glob(f".*{TMP_MARK}*") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint IO with atomic local writes (remote URLs go through
    Lightning's own writer)."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} does not take storage_options, got {storage_options!r}")
        text = str(path)
        if "://" in text and not text.startswith("file://"):
            return super().save_checkpoint(checkpoint, path, storage_options)
        atomic_save(checkpoint, text[len("file://") :] if text.startswith("file://") else text)


def at_step_boundary(trainer) -> bool:
    """In on_train_batch_end: did this batch close an optimizer step (not only accumulate)?"""
    return not trainer.fit_loop._should_accumulate()


class LastCheckpoint(L.Callback):
    """Writes `dirpath/last.ckpt` after every `every_n_steps` optimizer steps, after the last
    step (`trainer.max_steps`) and at the end of every training epoch."""

    def __init__(self, dirpath: str | Path, every_n_steps: int) -> None:
        self.dirpath = Path(dirpath)
        self.every_n_steps = every_n_steps
        self._saved_at: int | None = None

    @property
    def path(self) -> Path:
        return self.dirpath / RunDir.LAST

    def setup(self, trainer, pl_module, stage: str) -> None:
        if trainer.is_global_zero:  # (an interrupted sharded swap is put back by train(), before resume)
            for p in remove_stale_temporaries(self.dirpath):
                log.info("removed %s, left by a process killed while saving", p.name)

    def on_train_start(self, trainer, pl_module) -> None:
        self._saved_at = trainer.global_step  # a resumed run has this step on disk already

    def saved_step(self) -> int | None:
        """The global step last.ckpt holds (None: there is none)."""
        return read_checkpoint(self.path, weights=False)["global_step"] if self.path.exists() else None

    def latest(self) -> tuple[Path, int | None]:
        """The checkpoint a stop names and the step it holds: last.ckpt, else the best-STEP
        checkpoint of the latest step (a validation saved it before any last.ckpt was due),
        else (last.ckpt, None): none was written."""
        step = self.saved_step()
        if step is not None:
            return self.path, step
        best = []
        for path in self.dirpath.glob(RunDir.BEST_FILES):
            found = re.fullmatch(r"best-(\d+)(?:-v\d+)?\.ckpt", path.name)
            if found and path.is_file():
                best.append((int(found.group(1)), path))
        if not best:
            return self.path, None
        step, path = max(best)
        return path, step

    def save(self, trainer) -> None:
        if self._saved_at == trainer.global_step:
            return
        trainer.save_checkpoint(self.path, weights_only=False)  # everything, to resume from
        self._saved_at = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not at_step_boundary(trainer):
            return  # mid-accumulation: the gradients gathered so far are not in a checkpoint
        step = trainer.global_step
        final = 0 < trainer.max_steps <= step
        # the final step too: a checkpoint taken here (not after fit returns) is one Lightning
        # resumes exactly, e.g. when the run is later continued with a larger max_steps
        if step > 0 and (step % self.every_n_steps == 0 or final):
            self.save(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.save(trainer)


class RunRecord(L.Callback):
    """Stores the run's identity in every checkpoint: its directory and each logger's name
    and version, so a resumed run keeps writing to the same logs."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = str(run_dir)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        checkpoint["zoo_run"] = {
            "run_dir": self.run_dir,
            "loggers": {type(lg).__name__: str(lg.version) for lg in trainer.loggers},
            "world_size": int(trainer.world_size),
        }
