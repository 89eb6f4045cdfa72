"""zoo-train with a SIGTERM sent to itself at a chosen validation batch (fault injection for the
tests): `python tests/cli/signal_in_validation.py STEP BATCH zoo-train overrides...` sends it
when the in-loop validation after optimizer step STEP has finished BATCH batches, then runs on
as zoo-train does."""

import os
import runpy
import signal
import sys

from zoo.training.signals.interrupt import Interrupt

STEP, BATCH = int(sys.argv[1]), int(sys.argv[2])
_original = Interrupt.on_validation_batch_end
_sent = []


def _send_then_run(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
    if not _sent and not trainer.sanity_checking and trainer.global_step == STEP and batch_idx + 1 == BATCH:
        _sent.append(True)
        os.kill(os.getpid(), signal.SIGTERM)
    return _original(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx)


Interrupt.on_validation_batch_end = _send_then_run
sys.argv = ["zoo-train", *sys.argv[3:]]
runpy.run_module("zoo.cli.train", run_name="__main__", alter_sys=True)  # ranks start as -m zoo.cli.train
