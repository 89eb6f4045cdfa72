"""The progress bar counts optimizer steps toward trainer.max_steps ("step 5/5"), also after a
mid-epoch resume (Lightning's own bar counts the epoch's batches: "Epoch 0/-2", "199/149")."""

from __future__ import annotations

import lightning as L
import torch

from zoo.training.monitor.progress import StepTQDMProgressBar


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=4)


def fit(tmp_path, max_steps, ckpt=None):
    bar = StepTQDMProgressBar()
    trainer = L.Trainer(
        max_steps=max_steps,
        callbacks=[bar],
        logger=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
    )
    seen = []

    class Watch(L.Callback):
        def on_train_batch_end(self, trainer, *args):
            seen.append((bar.train_progress_bar.n, bar.train_progress_bar.total, bar.train_progress_bar.desc))

    trainer.callbacks.append(Watch())
    trainer.fit(Tiny(), ckpt_path=ckpt)
    return trainer, seen


def test_the_bar_counts_steps_to_max_steps_also_after_a_resume(tmp_path):
    trainer, seen = fit(tmp_path, 3)
    assert [n for n, _, _ in seen] == [1, 2, 3] and {t for _, t, _ in seen} == {3}
    assert all(d.startswith("step") for _, _, d in seen)
    ckpt = tmp_path / "three.ckpt"
    trainer.save_checkpoint(ckpt)
    _, resumed = fit(tmp_path, 7, ckpt=str(ckpt))  # mid-epoch (16 batches an epoch)
    assert [n for n, _, _ in resumed] == [4, 5, 6, 7] and {t for _, t, _ in resumed} == {7}
