"""Fully sharded data parallelism (FSDP2, `torch.distributed.fsdp.fully_shard`) through
Lightning's `ModelParallelStrategy`, on one data-parallel dimension over every rank.

    zoo-train trainer=fsdp                                     # every GPU of this machine
    zoo-train trainer=fsdp trainer.accelerator=cpu trainer.devices=2 trainer.precision=32-true   # gloo

Why FSDP2 and this strategy: FSDP2 shards each parameter as a DTensor (no flat parameters), so
the checkpoint keys, the optimizer and gradient clipping by norm stay the same as without
sharding, it runs on CPU with gloo as well as on GPUs, and its distributed checkpoints
reshard when a run resumes on another number of ranks. Lightning's `FSDPStrategy` wraps the
older FSDP1, which refuses clipping by norm under its precision plugin and CPU training.

Each transformer layer is one sharding unit (its parameters are gathered for its forward and
backward, then freed); the rest of the model (embeddings, final norm, output head) is the
root unit (`zoo.models.sharding`). bf16-mixed gathers parameters in bf16 and reduces
gradients in float32 (FSDP2's `MixedPrecisionPolicy`); the optimizer holds float32 shards.

Checkpoints are directories (`last.ckpt/`): one shard file per rank plus `meta.pt` (loops,
callbacks, schedule: plain data), written to a temporary directory and swapped in, so a kill
while saving leaves the previous checkpoint. `zoo.training.checkpoint.files.read_checkpoint` gathers the
shards into one state dict on one process for zoo-eval / zoo-generate / zoo-export, and fit
ends with `checkpoints/full.ckpt`, the whole model in one file.

Validation runs every example on every rank: a sharded forward is a collective, so every rank
must run the same number of forwards (and generation steps), and the metrics are then the same
on every rank without a reduction."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any, Optional

import torch
from lightning.pytorch.strategies import ModelParallelStrategy

from zoo.config.trainer import SHARDED_PRECISIONS, SHARDED_STRATEGY
from zoo.training.checkpoint.files import SHARDED_META, is_sharded_checkpoint, read_checkpoint, safe_shard_reader
from zoo.training.checkpoint.saving import atomic_save

log = logging.getLogger("zoo")

STRATEGY_NAME = SHARDED_STRATEGY
# the precisions FSDP2 runs here: Lightning's model-parallel strategy has no fp16 grad scaler
PRECISIONS = SHARDED_PRECISIONS


class ShardedDataParallel(ModelParallelStrategy):
    """FSDP2 over all ranks (data_parallel = world size, no tensor parallelism)."""

    strategy_name = STRATEGY_NAME
    # zoo's data module and tasks read this: every rank validates on every example
    replicated_validation = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(data_parallel_size="auto", tensor_parallel_size=1, save_distributed_checkpoint=True,
                         **kwargs)

    def setup_environment(self) -> None:
        self._data_parallel_size = self.num_nodes * self.num_processes  # one FSDP dimension
        self._tensor_parallel_size = 1
        super().setup_environment()

    # -- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self, checkpoint: dict, filepath, storage_options: Optional[Any] = None) -> None:
        """Every rank writes its shard into `.NAME.tmp-sharded/`; then rank 0 swaps it in for
        NAME (old -> `.NAME.old-sharded`, tmp -> NAME, old removed). A kill between the two
        renames leaves `.NAME.old-sharded`, which `recover_sharded` puts back."""
        path = Path(self.broadcast(str(filepath)))
        tmp = path.with_name(f".{path.name}.tmp-sharded")
        old = path.with_name(f".{path.name}.old-sharded")
        if self.global_rank == 0 and tmp.exists():
            shutil.rmtree(tmp)
        self.barrier("zoo_sharded_save_start")
        super().save_checkpoint(checkpoint, tmp, storage_options)
        self.barrier("zoo_sharded_save_written")
        if self.global_rank == 0:
            _fsync_tree(tmp)
            if path.exists():
                if old.exists():
                    shutil.rmtree(old)
                os.replace(path, old)
            os.replace(tmp, path)
            if old.exists():
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        self.barrier("zoo_sharded_save_done")

    def load_checkpoint(self, checkpoint_path, weights_only: Optional[bool] = None) -> dict:
        """A sharded checkpoint (any number of ranks wrote it) or a single-file one, read as
        data: the shard index is unpickled with an allow-list (`safe_shard_reader`)."""
        from torch.distributed.checkpoint import load as dcp_load
        from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                             get_optimizer_state_dict, set_optimizer_state_dict)

        path = Path(self.broadcast(str(checkpoint_path)))
        if not is_sharded_checkpoint(path):
            return super().load_checkpoint(path, weights_only=True)
        assert self.model is not None
        module_state = {"state_dict": get_model_state_dict(self.model)}
        dcp_load(module_state, storage_reader=safe_shard_reader(path))
        self.model.load_state_dict(module_state["state_dict"], strict=True)
        for idx, optimizer in enumerate(self.optimizers):
            key = f"optimizer_{idx}"
            optim_state = {key: get_optimizer_state_dict(self.model, optimizer)}
            dcp_load(optim_state, storage_reader=safe_shard_reader(path))
            set_optimizer_state_dict(self.model, optimizer, optim_state_dict=optim_state[key],
                                     options=StateDictOptions(cpu_offload=True))
        return torch.load(path / SHARDED_META, map_location="cpu", weights_only=True)

    def remove_checkpoint(self, filepath) -> None:
        if self.is_global_zero:
            path = Path(filepath)
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()


def _fsync_tree(directory: Path) -> None:
    for p in directory.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def recover_sharded(ckpt_dir: Path) -> list[str]:
    """Put back a sharded checkpoint whose swap a kill interrupted; drop unfinished writes."""
    notes = []
    if not ckpt_dir.is_dir():
        return notes
    for old in ckpt_dir.glob(".*.old-sharded"):
        target = ckpt_dir / old.name[1:-len(".old-sharded")]
        if not target.exists():
            os.replace(old, target)
            notes.append(f"restored {target.name} from a save a kill interrupted")
        else:
            shutil.rmtree(old)
    for tmp in ckpt_dir.glob(".*.tmp-sharded"):
        shutil.rmtree(tmp)
        notes.append(f"removed {tmp.name}, left by a process killed while saving")
    return notes


def write_full_checkpoint(sharded: Path, target: Path) -> Path:
    """One file with the whole model (weights, hyperparameters, tokenizer, counters; no
    optimizer) from a sharded checkpoint: what zoo-eval, zoo-generate and zoo-export read
    on one device without the shards."""
    data = read_checkpoint(sharded)
    data.pop("optimizer_states", None)
    atomic_save(data, target)
    return target
