"""zoo-train with a SIGTERM sent to itself at a chosen validation batch (fault injection for the
tests): `plant(STEP, BATCH)` in a forked zoo-train (tests/forked.py's `before`), or `python
tests/cli/signal_in_validation.py STEP BATCH zoo-train overrides...`, sends it when the in-loop
validation after optimizer step STEP has finished BATCH batches, then runs on as zoo-train does.
The callback is patched on its class, so a zoo-train imported before the patch sees it too."""

import os
import runpy
import signal
import sys

from zoo.training.signals.interrupt import Interrupt


def plant(step: int, batch: int) -> None:
    """From now on in this process: SIGTERM to itself once, at batch `batch` of the validation
    after step `step` (not in Lightning's sanity check)."""
    original = Interrupt.on_validation_batch_end
    sent: list[bool] = []

    def _send_then_run(self, trainer, pl_module, outputs, batch_, batch_idx, dataloader_idx=0):
        if not sent and not trainer.sanity_checking and trainer.global_step == step and batch_idx + 1 == batch:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, trainer, pl_module, outputs, batch_, batch_idx, dataloader_idx)

    Interrupt.on_validation_batch_end = _send_then_run  # type: ignore[method-assign]


if __name__ == "__main__":
    plant(int(sys.argv[1]), int(sys.argv[2]))
    sys.argv = ["zoo-train", *sys.argv[3:]]
    runpy.run_module("zoo.cli.train", run_name="__main__", alter_sys=True)  # ranks start as -m zoo.cli.train
