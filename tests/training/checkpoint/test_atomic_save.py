"""Checkpoint writing: atomic saves that leave the old file whole when a save fails, stale
temporaries cleaned up, `last.ckpt` at the steps promised (every N optimizer steps, the final
step, each epoch end, never twice for one step) and the run's identity in every file."""

from __future__ import annotations

import pickle

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.training.checkpoint.saving import (
    AtomicCheckpointIO,
    LastCheckpoint,
    RunRecord,
    atomic_save,
    remove_stale_temporaries,
)


def test_atomic_save_writes_and_a_failed_save_keeps_the_old_file(tmp_path):
    path = tmp_path / "sub" / "x.ckpt"
    atomic_save({"a": torch.arange(3)}, path)  # creates the directory
    assert torch.equal(torch.load(path)["a"], torch.arange(3))
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        atomic_save({"a": lambda: 0}, path)  # torch.save fails midway
    assert torch.equal(torch.load(path)["a"], torch.arange(3))  # the old file, whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.ckpt"]  # no temporary left


def test_stale_temporaries_are_removed_and_nothing_else(tmp_path):
    stale = [tmp_path / ".last.ckpt.tmp-123", tmp_path / ".config.yaml.tmp-9"]
    keep = [tmp_path / "last.ckpt", tmp_path / ".hidden", tmp_path / "x.tmp-1"]
    for p in stale + keep:
        p.write_text("x")
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted(stale)
    assert sorted(p for p in tmp_path.iterdir()) == sorted(keep)
    assert remove_stale_temporaries(tmp_path / "missing") == []


def test_checkpoint_io_writes_local_paths_atomically_and_refuses_storage_options(tmp_path):
    io = AtomicCheckpointIO()
    io.save_checkpoint({"step": 3}, f"file://{tmp_path}/a.ckpt")
    io.save_checkpoint({"step": 4}, tmp_path / "b.ckpt")
    assert torch.load(tmp_path / "a.ckpt")["step"] == 3 and torch.load(tmp_path / "b.ckpt")["step"] == 4
    with pytest.raises(TypeError, match="storage_options"):
        io.save_checkpoint({"step": 5}, tmp_path / "c.ckpt", storage_options={"x": 1})
    assert not (tmp_path / "c.ckpt").exists()


def test_local_paths_go_through_the_atomic_writer_and_urls_through_lightnings(tmp_path, monkeypatch):
    from zoo.training.checkpoint import saving

    written = []
    real = saving.atomic_save
    monkeypatch.setattr(saving, "atomic_save", lambda obj, path: written.append(str(path)) or real(obj, path))
    io = AtomicCheckpointIO()
    io.save_checkpoint({"step": 1}, tmp_path / "a.ckpt")
    io.save_checkpoint({"step": 2}, f"file://{tmp_path}/b.ckpt")
    assert written == [str(tmp_path / "a.ckpt"), str(tmp_path / "b.ckpt")]
    io.save_checkpoint({"step": 3}, "memory://zoo-test/c.ckpt")  # fsspec's in-memory file system
    assert len(written) == 2
    assert io.load_checkpoint("memory://zoo-test/c.ckpt")["step"] == 3


def test_the_bytes_are_in_the_file_when_it_is_synced(tmp_path, monkeypatch):
    """fsync makes durable what the OS has; Python's buffer must be flushed into it first."""
    import os

    sizes = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: sizes.append(os.fstat(fd).st_size) or real(fd))
    path = tmp_path / "x.ckpt"
    atomic_save({"a": torch.arange(3)}, path)  # a small file: it would sit whole in the buffer
    assert sizes and sizes[0] == path.stat().st_size > 0


class _Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _Recording(LastCheckpoint):
    """LastCheckpoint noting the optimizer step of each file it writes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps: list[int] = []

    def save(self, trainer) -> None:
        before = self._saved_at
        super().save(trainer)
        if self._saved_at != before:
            self.steps.append(trainer.global_step)


@pytest.mark.parametrize(
    "max_steps, every, accumulate, expected",
    [
        (7, 3, 2, [3, 4, 6, 7]),  # 8 batches an epoch, 2 per step: epoch end at step 4; final step 7
        (8, 3, 1, [3, 6, 8]),  # 8 steps an epoch: the epoch end is the final step, written once
        (5, 2, 4, [2, 4, 5]),  # 2 steps an epoch: epoch ends at 2 and 4 coincide with every=2
        (1, 3, 1, [1]),  # one step: the final step, long before every=3 and the epoch end
    ],
)
def test_last_checkpoint_is_written_at_the_promised_steps(tmp_path, max_steps, every, accumulate, expected):
    data = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=1)  # 8 batches an epoch
    saver = _Recording(tmp_path, every_n_steps=every)
    stale = tmp_path / ".last.ckpt.tmp-99999"  # left by a process killed while saving
    stale.write_bytes(b"half a checkpoint")
    trainer = L.Trainer(
        max_steps=max_steps,
        accumulate_grad_batches=accumulate,
        callbacks=[saver, RunRecord(tmp_path)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(_Tiny(), data)
    assert saver.steps == expected
    assert not stale.exists()
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == max_steps
    assert checkpoint["zoo_run"] == {"run_dir": str(tmp_path), "loggers": {}, "world_size": 1}
