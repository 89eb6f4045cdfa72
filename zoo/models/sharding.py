"""How a zoo model is cut into FSDP2 sharding units (`torch.distributed.fsdp.fully_shard`):
one unit per transformer layer of every stack, then the model itself as the root unit
(embeddings, position tables, final norms, output head). A unit's parameters are gathered for
its forward and backward and freed after, so a rank holds one whole layer at a time.

A training step enters the root unit once: `forward_loss` (stack and output head in one call)
is registered as a forward method, and validation reads the logits a plain forward returns.
(Two entries per step, a forward and then the head as a method of its own, free the root's
gathered parameters between them: on CUDA that ended in illegal memory accesses.) The encoder,
which generation calls on its own, is registered too.

With compile (task.compile=true), each layer is compiled in place before it is sharded, as
torchtitan and torchtune do under FSDP2: the layers are the repeated, costly part, a layer's
compiled graph serves every layer of its shape, and FSDP2's gather and free hooks run between the
compiled layers (dynamo skips them), never inside a graph. The root unit (embeddings, head,
loss) runs eagerly. Compiling in place keeps parameter names, so checkpoints are those of an
eager run."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.models.base import ZooModel
from zoo.nn.block import Stack

FORWARD_METHODS = ("forward_loss", "forward_losses", "encode")
REPLICATE_DIM, SHARD_DIM = "replicate", "shard"  # the dimensions of a hybrid (HSDP) mesh


def sharding_mesh(mesh: Any) -> Any:
    """The mesh FSDP2 shards over: a hybrid 2-D (replicate, shard) one whole (fully_shard then
    shards over its second dimension and replicates over its first: HSDP), else its
    data-parallel dimension."""
    names = mesh.mesh_dim_names or ()
    return mesh if REPLICATE_DIM in names else mesh["data_parallel"]


def layers(model: nn.Module) -> list[nn.Module]:
    """Every layer of every stack, in the order the forward runs them."""
    return [layer for stack in model.modules() if isinstance(stack, Stack) for layer in stack.layers]


def shard(model: ZooModel, mesh: Any, mp_policy: Any | None = None, compile: bool = False) -> ZooModel:
    """Apply fully_shard to each layer (compiled in place first with `compile`), then to the
    model; in place, returns the model."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    kwargs = {"mesh": mesh}
    if mp_policy is not None:
        kwargs["mp_policy"] = mp_policy
    if compile:
        model._compiled_call_impl = None  # a whole-model compilation would trace FSDP's root hooks
    for layer in layers(model):
        if compile:
            layer.compile()
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    model.sharded = True  # forward_loss then calls forward itself, inside the registered entry
    for name in FORWARD_METHODS:
        if callable(getattr(model, name, None)):
            register_fsdp_forward_method(model, name)
    return model
