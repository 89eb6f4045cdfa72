"""`LastValidation`: whether the last step of a run was validated, so that `fit` validates it
when the validation interval did not land on it."""

from __future__ import annotations

import lightning as L


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
