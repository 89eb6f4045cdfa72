"""Progress bars that count optimizer steps toward `trainer.max_steps`, the length zoo's runs
are given in: "step 120/300" (Lightning's own count batches of the current epoch against its
length, which reads "Epoch 0/-2" without max_epochs and "199/149" after a mid-epoch resume).
Without a positive max_steps they behave as Lightning's."""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar


def _steps(trainer) -> int | None:
    return trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None


class StepRichProgressBar(RichProgressBar):
    @property
    def total_train_batches(self):
        return _steps(self.trainer) or super().total_train_batches

    def _get_train_description(self, current_epoch: int) -> str:
        if _steps(self.trainer) is None:
            return super()._get_train_description(current_epoch)
        return f"{'step':{len(self.validation_description)}}"

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if _steps(trainer) is None:
            return super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if not self.is_disabled and self.train_progress_bar_id is None:
            self._initialize_train_progress_bar_id()
        self._update(self.train_progress_bar_id, trainer.global_step)
        self._update_metrics(trainer, pl_module)
        self.refresh()


class StepTQDMProgressBar(TQDMProgressBar):
    def on_train_epoch_start(self, trainer, *args):
        super().on_train_epoch_start(trainer, *args)
        if _steps(trainer) is not None:
            bar = self.train_progress_bar
            bar.total = _steps(trainer)
            bar.n = bar.last_print_n = trainer.global_step
            bar.set_description("step")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if _steps(trainer) is None:
            return super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        bar = self.train_progress_bar
        if bar is not None and self._should_update(trainer.global_step, bar.total):
            bar.n = trainer.global_step
            bar.refresh()
            bar.set_postfix(self.get_metrics(trainer, pl_module))
