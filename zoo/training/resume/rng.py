"""The random number generators of every rank, saved in checkpoints and restored on resume.

Dropout, sampling and anything else drawn from the global generators continues on a resumed
run exactly as it would have without the interruption. The states are gathered from all ranks
at save time (a checkpoint is written by rank 0 alone) and each rank takes its own back; a
run resumed on a different number of ranks takes rank `r mod saved ranks`.

They are applied at the first training batch after the restore, not when the checkpoint is
read: Lightning's sanity check and data loader setup in between would otherwise draw from
them in the resumed run only."""

from __future__ import annotations

import random

import lightning as L
import numpy as np
import torch


def capture() -> dict:
    """This process's generator states as plain data (loads with weights_only=True)."""
    legacy = np.random.get_state()
    assert isinstance(legacy, tuple)  # the global generator is numpy's MT19937: its legacy tuple
    kind, keys, pos, has_gauss, gauss = legacy
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class RngState(L.Callback):
    """Saves `{"ranks": [state of rank 0, rank 1, ...]}`; restores this rank's on resume."""

    def __init__(self) -> None:
        self._trainer = None
        self._pending: list | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self._trainer = trainer

    def state_dict(self) -> dict:
        local = capture()
        trainer = self._trainer
        if trainer is None or trainer.world_size == 1 or not torch.distributed.is_initialized():
            return {"ranks": [local]}
        gathered: list = [None] * trainer.world_size
        torch.distributed.all_gather_object(gathered, local)
        return {"ranks": gathered}

    def load_state_dict(self, state_dict: dict) -> None:
        self._pending = list(state_dict["ranks"])

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._pending:
            restore(self._pending[trainer.global_rank % len(self._pending)])
            self._pending = None
