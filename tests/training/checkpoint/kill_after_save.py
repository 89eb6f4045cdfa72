"""zoo-train that SIGKILLs itself right after one checkpoint is written (fault injection for the
tests): `python tests/training/checkpoint/kill_after_save.py STEP FILE HOOK zoo-train overrides...`
ends the process the moment a file whose name matches FILE (last.ckpt, or best-*.ckpt for
the best by validation loss) has been written at optimizer step STEP from the Lightning hook HOOK
(on_train_batch_end: a periodic last.ckpt; on_train_epoch_end: last.ckpt at an epoch's end;
on_validation_end: best.ckpt after a validation). Until then it runs as zoo-train does.
`install(STEP, FILE, HOOK)` does the same to the process that calls it (tests/forked.py: a
process forked from a test's, whose zoo is imported already)."""

import fnmatch
import os
import runpy
import signal
import sys
from pathlib import Path

from zoo.training.checkpoint.saving import AtomicCheckpointIO


def install(step: int, file: str, hook: str) -> None:
    """From now on, this process SIGKILLs itself right after writing FILE at STEP from HOOK."""
    original = AtomicCheckpointIO.save_checkpoint

    def in_hook() -> bool:
        frame = sys._getframe()
        while frame is not None:
            if frame.f_code.co_name == hook:
                return True
            frame = frame.f_back
        return False

    def save_then_kill(self, checkpoint, path, storage_options=None):
        original(self, checkpoint, path, storage_options)
        if checkpoint.get("global_step") == step and fnmatch.fnmatch(Path(str(path)).name, file) and in_hook():
            os.kill(os.getpid(), signal.SIGKILL)  # nothing after the write runs: no finally, no flush

    AtomicCheckpointIO.save_checkpoint = save_then_kill


if __name__ == "__main__":
    install(int(sys.argv[1]), sys.argv[2], sys.argv[3])
    sys.argv = ["zoo-train", *sys.argv[4:]]
    runpy.run_module("zoo.cli.train", run_name="__main__", alter_sys=True)
