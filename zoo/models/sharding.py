"""How a zoo model is cut into FSDP2 sharding units (`torch.distributed.fsdp.fully_shard`):
one unit per transformer layer of every stack, then the model itself as the root unit
(embeddings, position tables, final norms, output head). A unit's parameters are gathered for
its forward and backward and freed after, so a rank holds one whole layer at a time.

The model's methods that read parameters outside `forward` (the output head in training and
validation, the encoder in generation) are registered as forward methods, so calling them
gathers the root unit's parameters like a forward does."""

from __future__ import annotations

from typing import Any, Optional

from torch import nn

from zoo.nn.block import Stack

FORWARD_METHODS = ("logits", "token_loss", "encode")


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
    for name in FORWARD_METHODS:
        if callable(getattr(model, name, None)):
            register_fsdp_forward_method(model, name)
    return model
