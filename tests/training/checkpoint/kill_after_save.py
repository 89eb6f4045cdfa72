"""zoo-train that SIGKILLs itself right after one checkpoint is written (fault injection for the
tests): `python tests/training/checkpoint/kill_after_save.py STEP FILE HOOK zoo-train overrides...`
ends the process the moment a file whose name matches FILE (last.ckpt, or best-*.ckpt for
the best by validation loss) has been written at optimizer step STEP from the Lightning hook HOOK
(on_train_batch_end: a periodic last.ckpt; on_train_epoch_end: last.ckpt at an epoch's end;
on_validation_end: best.ckpt after a validation). Until then it runs as zoo-train does."""

import fnmatch
import os
import runpy
import signal
import sys
from pathlib import Path

from zoo.training.checkpoint.saving import AtomicCheckpointIO

STEP, FILE, HOOK = int(sys.argv[1]), sys.argv[2], sys.argv[3]
_original = AtomicCheckpointIO.save_checkpoint


def _in_hook() -> bool:
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == HOOK:
            return True
        frame = frame.f_back
    return False


def _save_then_kill(self, checkpoint, path, storage_options=None):
    _original(self, checkpoint, path, storage_options)
    if checkpoint.get("global_step") == STEP and fnmatch.fnmatch(Path(str(path)).name, FILE) and _in_hook():
        os.kill(os.getpid(), signal.SIGKILL)  # nothing after the write runs: no finally, no flush


AtomicCheckpointIO.save_checkpoint = _save_then_kill
sys.argv = ["zoo-train", *sys.argv[4:]]
runpy.run_module("zoo.cli.train", run_name="__main__", alter_sys=True)
