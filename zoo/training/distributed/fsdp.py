"""Fully sharded data parallelism (FSDP2, `torch.distributed.fsdp.fully_shard`) through
Lightning's `ModelParallelStrategy`: over every rank (trainer=fsdp), or hybrid (trainer=hsdp) on
a (replicate, shard) mesh, sharded within each group of ranks and replicated across groups.

    zoo-train trainer=fsdp                                     # every GPU of this machine
    zoo-train trainer=fsdp trainer.accelerator=cpu trainer.devices=2 trainer.precision=32-true   # gloo
    zoo-train trainer=hsdp trainer.num_nodes=4                 # shard within a node, replicate across

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
callbacks, schedule, and optim.ema's average gathered whole: read as data), written to a temporary directory and swapped in, so a kill
while saving leaves the previous checkpoint. `zoo.training.checkpoint.files.read_checkpoint` gathers the
shards into one state dict on one process for zoo-eval / zoo-generate / zoo-export, and fit
ends with `checkpoints/full.ckpt`, the whole model in one file.

Validation splits the examples over the ranks as DDP does: a sharded forward is a collective,
so a rank with one batch fewer runs a filler batch counted nowhere (`zoo.data.even_batches`),
decoding (seq2seq's translations) ends on every rank together, and the metrics are reduced over
the ranks as under DDP."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.strategies import ModelParallelStrategy

from zoo.config.errors import ConfigError
from zoo.config.schema.trainer import SHARDED_PRECISIONS, SHARDED_STRATEGY
from zoo.models.sharding import REPLICATE_DIM, SHARD_DIM
from zoo.training.checkpoint.files import SHARDED_META, is_sharded_checkpoint, read_checkpoint, safe_shard_reader
from zoo.training.checkpoint.integrity import with_record, write_digests
from zoo.training.checkpoint.saving import atomic_save

log = logging.getLogger("zoo")

STRATEGY_NAME = SHARDED_STRATEGY
# the precisions FSDP2 runs here: Lightning's model-parallel strategy has no fp16 grad scaler
PRECISIONS = SHARDED_PRECISIONS


class ShardedDataParallel(ModelParallelStrategy):
    """FSDP2 over all ranks (data_parallel = world size, no tensor parallelism); with
    `hybrid`, HSDP: a 2-D mesh (replicate, shard) of `replicate` groups (default: one per node),
    each sharding the model over its world size / replicate ranks, the groups replicas of each
    other (gradients all-reduced across them). Ranks are numbered node by node, so a node's
    ranks form one shard group and each layer's all-gathers stay inside the node."""

    strategy_name = STRATEGY_NAME

    def __init__(self, replicate: int | None = None, hybrid: bool = False, **kwargs: Any) -> None:
        super().__init__(data_parallel_size="auto", tensor_parallel_size=1, save_distributed_checkpoint=True, **kwargs)
        self.hybrid = hybrid or replicate is not None
        self.replicate = replicate

    def setup_environment(self) -> None:
        self._data_parallel_size = self.num_nodes * self.num_processes  # one data-parallel dimension
        self._tensor_parallel_size = 1
        super().setup_environment()
        if self.hybrid:
            from torch.distributed.device_mesh import init_device_mesh

            replicate = self.replicate or self.num_nodes
            if self.world_size % replicate:
                raise ConfigError(f"trainer.replicate={replicate} must divide the world size {self.world_size}")
            shard = self.world_size // replicate
            self._device_mesh = init_device_mesh(
                self.root_device.type, (replicate, shard), mesh_dim_names=(REPLICATE_DIM, SHARD_DIM)
            )  # (R, S)
            assert self.lightning_module is not None  # set up with its module, as Lightning's own asserts
            self.lightning_module._device_mesh = self._device_mesh
            log.info("trainer.strategy=hsdp: %d replica(s), each sharded over %d rank(s)", replicate, shard)

    @property
    def distributed_sampler_kwargs(self) -> dict:
        return {"num_replicas": self.world_size, "rank": self.global_rank}  # every rank reads its own data

    # -- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self, checkpoint: dict, filepath, storage_options: Any | None = None) -> None:
        """Every rank writes its shard into `.NAME.tmp-sharded/`; then rank 0 swaps it in for
        NAME (old -> `.NAME.old-sharded`, tmp -> NAME, old removed). A kill between the two
        renames leaves `.NAME.old-sharded`, which `recover_sharded` puts back."""
        path = Path(self.broadcast(str(filepath)))
        tmp = path.with_name(f".{path.name}.tmp-sharded")
        old = path.with_name(f".{path.name}.old-sharded")
        if self.global_rank == 0 and tmp.exists():
            shutil.rmtree(tmp)
        self.barrier("zoo_sharded_save_start")
        # meta.pt (what is not sharded) says the directory is written with its digests
        super().save_checkpoint(with_record(checkpoint, sharded=True), tmp, storage_options)
        self.barrier("zoo_sharded_save_written")
        if self.global_rank == 0:
            write_digests(tmp)  # every rank's shard is on disk: what the directory holds, checked on load
            _fsync_tree(tmp)
            if path.exists():
                if old.exists():
                    shutil.rmtree(old)
                os.replace(path, old)
            os.replace(tmp, path)
            if old.exists():
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        self.barrier("zoo_sharded_save_done")

    def load_checkpoint(self, checkpoint_path, weights_only: bool | None = None) -> dict:
        """A sharded checkpoint (any number of ranks wrote it) or a single-file one, read as
        data: the shard index is unpickled with an allow-list (`safe_shard_reader`)."""
        from torch.distributed.checkpoint import load as dcp_load
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
            set_optimizer_state_dict,
        )

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
            set_optimizer_state_dict(
                self.model, optimizer, optim_state_dict=optim_state[key], options=StateDictOptions(cpu_offload=True)
            )
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
    notes: list[str] = []
    if not ckpt_dir.is_dir():
        return notes
    for old in ckpt_dir.glob(".*.old-sharded"):
        target = ckpt_dir / old.name[1 : -len(".old-sharded")]
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
