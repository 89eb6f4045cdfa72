"""A validation due at the step of a checkpoint runs when the run resumes from it
(zoo.training.checkpoint.validation_due), against Lightning's own resume, which goes on past it:
replayed on Lightning's loop state with a tiny module, in process."""

from __future__ import annotations

import csv

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.training.checkpoint.saving import LastCheckpoint
from zoo.training.checkpoint.validation_due import KEY, ValidationDue, validated


class _Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.validations: list[int] = []  # the global step of each finished validation

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        pass

    def on_validation_end(self):
        if not self.trainer.sanity_checking:
            self.validations.append(self.trainer.global_step)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _Crash(L.Callback):
    """Ends fit right after last.ckpt is written at `step` (a kill before that step's validation)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("killed")


def _fit(tmp_path, *, due: bool, ckpt=None, crash_at=None, metrics=None) -> tuple[_Tiny, L.Trainer]:
    model = _Tiny()
    callbacks = [LastCheckpoint(tmp_path, every_n_steps=3)]
    if due:
        callbacks.append(ValidationDue(metrics))
    if crash_at is not None:
        callbacks.append(_Crash(crash_at))
    trainer = L.Trainer(
        max_steps=9,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        val_check_interval=3,
        num_sanity_val_steps=0,
        limit_val_batches=2,
    )
    data = DataLoader(TensorDataset(torch.randn(20, 2)), batch_size=1)
    try:
        trainer.fit(model, data, data, ckpt_path=ckpt)
    except RuntimeError as exc:
        assert "killed" in str(exc)
    return model, trainer


@pytest.mark.parametrize("due", [False, True], ids=["lightning-alone", "validation-due"])
def test_a_checkpoint_written_before_its_steps_validation_runs_it_on_resume(tmp_path, due):
    straight, _ = _fit(tmp_path / "straight", due=due)
    assert straight.validations == [3, 6, 9]
    _fit(tmp_path / "killed", due=due, crash_at=3)
    saved = torch.load(tmp_path / "killed" / "last.ckpt", weights_only=False)
    assert saved["global_step"] == 3 and saved.get(KEY, False) is due
    resumed, trainer = _fit(tmp_path / "killed", due=due, ckpt=str(tmp_path / "killed" / "last.ckpt"))
    # Lightning alone goes on past the validation of step 3; ValidationDue runs it first
    assert resumed.validations == ([3, 6, 9] if due else [6, 9])
    total = trainer.fit_loop.epoch_loop.val_loop.batch_progress.total
    assert total.started == total.processed == total.completed  # no half-started batch left behind
    if due:
        assert trainer.fit_loop.epoch_loop._batches_that_stepped == 9  # as many as the straight run's


def test_a_checkpoint_between_validations_is_not_marked(tmp_path):
    _fit(tmp_path, due=True, crash_at=3)
    model = _Tiny()
    trainer = L.Trainer(
        max_steps=4,
        callbacks=[LastCheckpoint(tmp_path / "b", every_n_steps=2), ValidationDue()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        val_check_interval=3,
        num_sanity_val_steps=0,
        limit_val_batches=2,
    )
    data = DataLoader(TensorDataset(torch.randn(20, 2)), batch_size=1)
    trainer.fit(model, data, data)
    assert KEY not in torch.load(tmp_path / "b" / "last.ckpt", weights_only=False)  # step 4: none due


def test_a_validation_whose_row_is_in_metrics_csv_is_not_run_again(tmp_path):
    """The validation of step 3 ran (its row, logged at step 2, is in metrics.csv) before the
    run was killed: the resume goes on past it, without a second row."""
    _fit(tmp_path, due=True, crash_at=3)
    metrics = tmp_path / "metrics.csv"
    with open(metrics, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "train/loss", "val/loss"])
        writer.writeheader()
        writer.writerows(
            [
                {"step": 2, "train/loss": 1.0, "val/loss": ""},
                {"step": "x", "val/loss": 0.1},
                {"step": "", "val/loss": 0.2},
                {"step": 2, "train/loss": "", "val/loss": 0.5},
            ]
        )
    assert validated(metrics, 2) and not validated(metrics, 1) and not validated(tmp_path / "none.csv", 2)
    resumed, _ = _fit(tmp_path, due=True, ckpt=str(tmp_path / "last.ckpt"), metrics=metrics)
    assert resumed.validations == [6, 9]


class _Seen(_Tiny):
    """Records (epoch, first example) of each training batch."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[int, int]] = []

    def training_step(self, batch, batch_idx):
        self.seen.append(
            (self.trainer.current_epoch, round(float(batch[0][0, 0]) * len(self.trainer.train_dataloader.dataset)))
        )
        return super().training_step(batch, batch_idx)


class _CrashBefore(L.Callback):
    """Ends fit at the start of the batch after `step` (its validation has run)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer, *args) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("killed")


def _fit_epochs(tmp_path, *, fixed: bool, examples: int, limit=None, crash=None, ckpt=None, metrics=None, every=3):
    """max_steps=9, a validation every 3 steps, last.ckpt every `every` steps: epochs of 3
    batches, either because the data has 3 (`examples=3`) or because limit_train_batches=3 stops
    a longer one. zoo's resumable loader over a seeded shuffle, as zoo-train uses."""
    from zoo.data.resumable import EpochShardSampler, ResumableLoader

    torch.manual_seed(0)  # the same initial weights in every run
    model = _Seen()
    callbacks = [LastCheckpoint(tmp_path, every_n_steps=every)]
    if fixed:
        callbacks.append(ValidationDue(metrics))
    if crash is not None:
        callbacks.append(crash)
    trainer = L.Trainer(
        max_steps=9,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        val_check_interval=3,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        limit_val_batches=1,
        limit_train_batches=limit,
    )
    data = TensorDataset(torch.arange(float(examples)).unsqueeze(1).repeat(1, 2) / examples)  # example i: i/n twice
    train = ResumableLoader(data, sampler=EpochShardSampler(data, seed=0), batch_size=1)
    val = DataLoader(data, batch_size=1)
    try:
        trainer.fit(model, train, val, ckpt_path=ckpt)
    except RuntimeError as exc:
        assert "killed" in str(exc)
    return model


@pytest.mark.parametrize("fixed", [False, True], ids=["lightning-alone", "zoo"])
def test_a_checkpoint_at_an_epochs_last_batch_runs_its_validation_on_resume(tmp_path, fixed):
    """The epoch's last batch is the validation's step: a run killed after last.ckpt, before
    that validation, gets it back on resume (Lightning alone goes on without it), and trains on
    as the straight run does."""
    straight = _fit_epochs(tmp_path / "straight", fixed=fixed, examples=3)
    assert straight.validations == [3, 6, 9]
    _fit_epochs(tmp_path / "killed", fixed=fixed, examples=3, crash=_Crash(3))
    resumed = _fit_epochs(tmp_path / "killed", fixed=fixed, examples=3, ckpt=str(tmp_path / "killed" / "last.ckpt"))
    assert resumed.validations == ([3, 6, 9] if fixed else [6, 9])
    assert resumed.seen == straight.seen[3:]
    assert torch.equal(resumed.layer.weight, straight.layer.weight)


@pytest.mark.parametrize("fixed", [False, True], ids=["lightning-alone", "zoo"])
def test_an_epoch_ended_by_limit_train_batches_resumes_into_the_next_epoch(tmp_path, fixed):
    """limit_train_batches=3 ends each epoch of 20 examples after 3 batches. A run killed after
    the checkpoint at the first epoch's end (its validation done, its row in metrics.csv) must go
    on with the second epoch's batches; Lightning alone resumes inside the first epoch's rest."""
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("step,val/loss\n2,0.5\n")  # the validation of step 3 ran before the kill
    straight = _fit_epochs(tmp_path / "straight", fixed=fixed, examples=20, limit=3)
    assert [epoch for epoch, _ in straight.seen] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    _fit_epochs(tmp_path / "killed", fixed=fixed, examples=20, limit=3, crash=_CrashBefore(3), metrics=metrics)
    resumed = _fit_epochs(
        tmp_path / "killed",
        fixed=fixed,
        examples=20,
        limit=3,
        metrics=metrics,
        ckpt=str(tmp_path / "killed" / "last.ckpt"),
    )
    if fixed:
        assert resumed.seen == straight.seen[3:]
        assert resumed.validations == [6, 9]
        assert torch.equal(resumed.layer.weight, straight.layer.weight)
    else:
        assert [x for _, x in resumed.seen[:3]] != [x for _, x in straight.seen[3:6]]


class _CrashAtEpochEnd(L.Callback):
    """Ends fit in on_train_epoch_end at `step`, after LastCheckpoint wrote the epoch's end."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("killed")


@pytest.mark.parametrize(
    "saved, resumed",
    [(False, False), (False, True), (True, True)],
    ids=["lightning-alone", "zoo-reads-an-earlier-checkpoint", "zoo"],
)
def test_a_checkpoint_written_at_an_epochs_end_resumes_into_the_next_epoch_once(tmp_path, saved, resumed):
    """Epochs of 3 batches, last.ckpt every 5 steps: the one of step 3 is written at the first
    epoch's end (on_train_epoch_end, after its validation). Lightning alone resumes it by running
    that epoch's end again and counting the epoch twice: the second epoch trains on the third
    epoch's shuffle. zoo saves it (and reads one saved without zoo's repair) as the end of the
    epoch's last batch: the resumed run trains the straight run's batches, validates as it does
    and ends with its weights."""
    straight = _fit_epochs(tmp_path / "straight", fixed=True, examples=3, every=5)
    assert straight.validations == [3, 6, 9]
    _fit_epochs(tmp_path / "killed", fixed=saved, examples=3, every=5, crash=_CrashAtEpochEnd(3))
    last = tmp_path / "killed" / "last.ckpt"
    assert torch.load(last, weights_only=False)["global_step"] == 3
    again = _fit_epochs(tmp_path / "killed", fixed=resumed, examples=3, every=5, ckpt=str(last))
    if resumed:
        assert again.seen == straight.seen[3:]
        assert again.validations == [6, 9]  # the validation of step 3 ran before the kill
        assert torch.equal(again.layer.weight, straight.layer.weight)
    else:
        assert [epoch for epoch, _ in again.seen] == [1, 1, 1, 2, 2, 2]
        assert again.seen != straight.seen[3:]  # the shuffle of the epoch after
