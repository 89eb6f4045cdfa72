"""How a zoo model is cut into FSDP2 sharding units (`torch.distributed.fsdp.fully_shard`):
one unit per transformer layer of every stack, then the model itself as the root unit
(embeddings, position tables, final norms, output head). A unit's parameters are gathered for
its forward and backward and freed after, so a rank holds one whole layer at a time.

A training step enters the root unit once: `forward_loss` (stack and output head in one call)
is registered as a forward method, and validation reads the logits a plain forward returns.
(Two entries per step, a forward and then the head as a method of its own, free the root's
gathered parameters between them: on CUDA that ended in illegal memory accesses.) The encoder,
which generation calls on its own, is registered too."""

from __future__ import annotations

from typing import Any, Optional

from torch import nn

from zoo.nn.block import Stack

FORWARD_METHODS = ("forward_loss", "encode")


def layers(model: nn.Module) -> list[nn.Module]:
    """Every layer of every stack, in the order the forward runs them."""
    return [layer for stack in model.modules() if isinstance(stack, Stack) for layer in stack.layers]


def shard(model: nn.Module, mesh: Any, mp_policy: Optional[Any] = None) -> nn.Module:
    """Apply fully_shard to each layer, then to the model; in place, returns the model."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    kwargs = {"mesh": mesh}
    if mp_policy is not None:
        kwargs["mp_policy"] = mp_policy
    for layer in layers(model):
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    model.sharded = True  # forward_loss then calls forward itself, inside the registered entry
    for name in FORWARD_METHODS:
        if callable(getattr(model, name, None)):
            register_fsdp_forward_method(model, name)
    return model
