"""A validation that was due at the step of a checkpoint runs when the run resumes from it.

Lightning resumes a checkpoint written at the end of a training batch (zoo's `last.ckpt` every N
steps, or the one a signal stop writes) past the validation that step was due to run: a run
killed or stopped during that validation came back without its metrics row. Such a checkpoint
is marked `zoo_validation_due`; on load its loop state becomes the one Lightning writes from
inside a validation (`restarted_mid_evaluation`, no batch of it done), so the resumed run starts
with that whole validation, then trains on, and metrics.csv reads as if nothing had happened.
Whether the validation ran before the run ended is read from metrics.csv, the record a resumed
run keeps: a validation row at the step is there (nothing to redo) or it is not.

A signal stop during a validation saves through here as well (`before_validation`): the weights,
optimizer and generators are those of the step's end (validation changes none of them: its data
loaders draw from generators of their own), and the loop state is put back to the validation's
start. The same holds at the last batch of an epoch.

One more repair of Lightning's loop state: a checkpoint written at the end of an epoch's last
batch records `is_last_batch` from the data fetcher, which is False when `limit_train_batches`
ends the epoch before the loader does, and the loader's own position is mid-epoch; Lightning's
restart then stays in the finished epoch and trains on the rest of its data instead of the next
epoch's. zoo saves the epoch as ended there: `is_last_batch` True and each resumable loader at
the start of the next epoch.

And one at the epoch's end itself: a checkpoint written from `on_train_epoch_end` (last.ckpt at
every epoch end) holds the epoch counted as processed but not yet completed. Resuming it with
`trainer.max_steps` set, Lightning runs the end of that epoch a second time and counts it twice:
every later epoch reads the shuffle of the epoch after it, and the weights part from those of a
run never stopped. zoo saves such a checkpoint (and reads one written before it did so) in the
form of the epoch's last batch end with its validation done, the form Lightning resumes into the
next epoch.

The loop-state layout is Lightning's (2.6); `tests/training/checkpoint/test_validation_due.py` replays it."""

from __future__ import annotations

import csv
from pathlib import Path

import lightning as L
from lightning.pytorch.trainer.states import TrainerFn

KEY = "zoo_validation_due"
_TRAIN = "epoch_loop.batch_progress"
_VAL = "epoch_loop.val_loop.batch_progress"


def _in_fit(trainer) -> bool:
    return trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking


def _inside_epoch(trainer) -> bool:
    """The batch just trained is not the last of its epoch (in on_train_batch_end or in the
    validation after it: `processed` counts the batch in both, `completed` only in the second)."""
    return trainer.fit_loop.epoch_loop.batch_progress.current.processed < trainer.num_training_batches


def validated(metrics: Path | None, step: int) -> bool:
    """Does metrics.csv hold a validation row logged at `step` (Lightning's logging step: a
    validation after optimizer step N logs at N - 1)?"""
    if metrics is None or not metrics.is_file():
        return False
    with open(metrics, newline="") as f:
        for row in csv.DictReader(f):
            try:
                at = int(float(row.get("step") or "nan"))
            except (ValueError, OverflowError):  # a damaged row says nothing
                continue
            if at == step and any(k.startswith("val/") and v for k, v in row.items() if k):
                return True
    return False


class ValidationDue(L.Callback):
    def __init__(self, metrics: Path | None = None) -> None:
        self.metrics = metrics  # the run's metrics.csv
        self._val_start: dict | None = None  # the validation loop's totals when it started
        self._before_validation = False  # the next save is a stop's, from inside a validation
        self._fix_totals = False  # a resumed validation ran (or was skipped): totals to put back

    # -- saving ---------------------------------------------------------------------------------

    def on_validation_start(self, trainer, pl_module) -> None:
        if _in_fit(trainer):
            self._val_start = trainer.fit_loop.epoch_loop.val_loop.batch_progress.total.state_dict()

    def can_stop_inside(self, trainer) -> bool:
        """Can a stop save from inside the validation now running and resume it whole?"""
        return _in_fit(trainer) and trainer.validating and self._val_start is not None

    def save_before_validation(self, trainer, last) -> None:
        """Save `last` (a LastCheckpoint) from inside a validation, as of the validation's start.
        (When last.ckpt was written at this step already, before the validation, it stays.)"""
        self._before_validation = True
        try:
            last.save(trainer)
        finally:
            self._before_validation = False

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if not _in_fit(trainer) or "loops" not in checkpoint:
            return
        loops = checkpoint["loops"]["fit_loop"]
        if self._before_validation:
            assert self._val_start is not None  # saved from inside a validation (`can_stop_inside`)
            train = loops[_TRAIN]
            for part in ("total", "current"):  # back to the end of the training batch
                train[part]["completed"] -= 1
            loops[_VAL] = {
                **loops[_VAL],
                "total": dict(self._val_start),
                "current": {k: 0 for k in self._val_start},
                "is_last_batch": False,
            }
            checkpoint[KEY] = True
            return
        if _written_at_epoch_end(loops):
            _as_last_batch_end(loops)
            return
        train = trainer.fit_loop.epoch_loop.batch_progress.total
        at_batch_end = train.processed == train.completed + 1  # inside on_train_batch_end
        if at_batch_end and not _inside_epoch(trainer):
            _epoch_ended(loops)
        if at_batch_end and _due(trainer):
            checkpoint[KEY] = True

    # -- resuming -------------------------------------------------------------------------------

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if trainer.state.fn != TrainerFn.FITTING:
            return
        loops = (checkpoint.get("loops") or {}).get("fit_loop")
        if loops and _written_at_epoch_end(loops):  # a checkpoint saved before zoo repaired this form
            _as_last_batch_end(loops)
        if not checkpoint.get(KEY):
            return
        if validated(self.metrics, checkpoint["global_step"] - 1):
            return  # it ran and its row is kept: Lightning goes on past it, as it would
        loops = checkpoint["loops"]["fit_loop"]
        train, val = loops[_TRAIN], loops[_VAL]
        for part in ("total", "current"):  # as saved from inside the step's validation
            train[part]["completed"] += 1
        done = val["total"]["completed"]
        val["total"] = {"ready": done + 1, "started": done + 1, "processed": done, "completed": done}
        val["current"] = {"ready": 1, "started": 1, "processed": 0, "completed": 0}
        val["is_last_batch"] = False
        self._fix_totals = True

    def _put_totals_back(self, trainer) -> None:
        """The mid-validation form counts one batch started and never processed: take it back,
        or a later resume would take any checkpoint for one written mid-validation."""
        if self._fix_totals:
            total = trainer.fit_loop.epoch_loop.val_loop.batch_progress.total
            total.ready -= 1
            total.started -= 1
            self._fix_totals = False

    def on_validation_end(self, trainer, pl_module) -> None:
        if _in_fit(trainer):
            self._put_totals_back(trainer)
            self._val_start = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._put_totals_back(trainer)  # the validation was not run after all (changed settings)


def _epoch_ended(loops: dict) -> None:
    """The saved loop state of a checkpoint at an epoch's last batch says so, whatever the data
    fetcher saw: `is_last_batch`, and each loader's position (`ResumableLoader.state_dict`) at the
    start of the next epoch."""
    loops[_TRAIN]["is_last_batch"] = True
    for state in (loops.get("state_dict") or {}).get("combined_loader") or []:
        if isinstance(state, dict) and "epoch" in state:
            state.update(epoch=int(state["epoch"]) + 1, batches=0, examples=0)


def _written_at_epoch_end(loops: dict) -> bool:
    """Was this loop state saved by a hook of an epoch's end (`on_train_epoch_end`)? Lightning
    counts the epoch processed before those hooks and completed after them; every batch of the
    epoch is completed."""
    epoch, batches = loops["epoch_progress"]["total"], loops[_TRAIN]["total"]
    return (
        epoch["ready"] == epoch["started"] == epoch["processed"] == epoch["completed"] + 1
        and batches["ready"] == batches["started"] == batches["processed"] == batches["completed"] > 0
    )


def _as_last_batch_end(loops: dict) -> None:
    """The loop state of an epoch's end as that of its last batch's end, after the batch's
    validation (if one was due: it ran before the epoch's end), the epoch ended (`_epoch_ended`).
    Lightning resumes this form into the next epoch, once: the epoch counted processed and
    completed, the step counter of the loggers one on, the validation not run again."""
    for part in ("total", "current"):
        loops["epoch_progress"][part]["processed"] -= 1
        loops[_TRAIN][part]["completed"] -= 1
    loops["epoch_loop.state_dict"]["_batches_that_stepped"] -= 1
    _epoch_ended(loops)


def _due(trainer) -> bool:
    """Lightning's own decision, taken right after on_train_batch_end, whether this step validates."""
    loop = trainer.fit_loop.epoch_loop
    fetcher = trainer.fit_loop._data_fetcher
    return fetcher is not None and trainer.enable_validation and loop._should_check_val_fx(fetcher)
