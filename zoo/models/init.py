"""How a model's parameters start: one rule per parameter name, and one random stream per
parameter.

Every parameter that draws (a matrix or a table: Normal(0, std)) draws from a generator of its
own, seeded by the model's `init_seed` and the parameter's name. Its first value therefore does
not depend on the order modules are built in, on which other parameters exist, or on where its
storage lives, and building draws nothing from torch's global generator but the one `init_seed`
(`build_model` draws it, then builds under `torch.random.fork_rng`). That is what lets
`trainer=fsdp` build a model without its weights:

1. the task is built under `parameters_on_meta()`: every parameter is a meta tensor (no storage,
   nothing drawn); buffers (RoPE's frequencies, ALiBi's slopes) are built as usual;
2. each layer, then the model, is sharded (`zoo.models.sharding.shard`): the parameters become
   DTensors of this rank's rows, still on the meta device;
3. `materialize` gives each rank storage for its rows only, then draws each parameter whole, one
   at a time, and keeps this rank's rows (`distribute_tensor(..., src_data_rank=None)`: no
   communication).

A rank's memory at setup is then its share of the weights plus the largest single parameter
(drawn whole before it is cut), and the weights are exactly those of an unsharded build with
the same seed, on any number of ranks."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn

from zoo.config.facts.starts import ONES, ZEROS, Init, Start, normal

__all__ = [
    "ONES",
    "ZEROS",
    "Init",
    "Start",
    "draw_seed",
    "has_meta_parameters",
    "initial_value",
    "initialise",
    "materialize",
    "missing_rules",
    "normal",
    "parameter_seed",
    "parameters_on_meta",
]


def draw_seed() -> int:
    """The seed of a model's parameters: one draw from torch's global CPU generator (so
    `seed_everything` / `torch.manual_seed` decide it), made on the CPU whatever device is
    the default."""
    return int(torch.randint(0, 2**62, (), device="cpu"))


def parameter_seed(seed: int, name: str) -> int:
    """The seed of one parameter's generator: a digest of the model's seed and the name."""
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def initial_value(init: Init, shape: torch.Size, seed: int, name: str) -> torch.Tensor:
    """The whole first value of parameter `name`, float32 on the CPU."""
    if init.start == Start.zeros:
        return torch.zeros(shape)
    if init.start == Start.ones:
        return torch.ones(shape)
    if init.start == Start.constant:
        return torch.full(shape, init.value)
    if init.start == Start.log_arange:
        return torch.arange(1, shape[-1] + 1, dtype=torch.float32).log().expand(shape).clone()
    if init.start == Start.log_uniform:
        generator = torch.Generator().manual_seed(parameter_seed(seed, name))
        return torch.empty(shape).uniform_(init.low, init.high, generator=generator).log_()
    if init.std is None:
        raise ValueError(f"parameter {name}: a normal start without a std (resolve it with the model's init_std)")
    generator = torch.Generator().manual_seed(parameter_seed(seed, name))
    return torch.empty(shape).normal_(0.0, init.std, generator=generator)


def missing_rules(module: nn.Module, rules: Mapping[str, Init]) -> list[str]:
    return [name for name, _ in module.named_parameters() if name not in rules]


@torch.no_grad()
def initialise(params: Iterable[tuple[str, nn.Parameter]], rules: Mapping[str, Init], seed: int) -> None:
    """Give each parameter its first value by its rule: a plain tensor whole, a sharded one
    (DTensor) its own rows of the whole value. Meta parameters (no storage yet) are skipped."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    for name, param in params:
        if param.is_meta:
            continue
        if name not in rules:
            raise KeyError(f"parameter {name} has no initialisation rule")
        init = rules[name]
        if isinstance(param, DTensor):
            if init.start == Start.zeros:
                param.zero_()
            elif init.start == Start.ones:
                param.fill_(1.0)
            elif init.start == Start.constant:
                param.fill_(init.value)
            else:
                whole = initial_value(init, param.shape, seed, name).to(param.device, param.dtype)
                param.copy_(distribute_tensor(whole, param.device_mesh, param.placements, src_data_rank=None))
                del whole
        else:
            param.copy_(initial_value(init, param.shape, seed, name))


@contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Build modules with every parameter on the meta device (no storage, nothing drawn);
    buffers are built as usual. A parameter is allocated uninitialised (`torch.empty`: no pages
    touched) and replaced by its meta twin as it is registered."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param) -> None:
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    setattr(nn.Module, "register_parameter", on_meta)  # noqa: B010 - a method replaced for the block
    try:
        yield
    finally:
        setattr(nn.Module, "register_parameter", register)  # noqa: B010


def has_meta_parameters(module: nn.Module) -> bool:
    return any(p.is_meta for p in module.parameters())


def materialize(
    module: nn.Module, device: torch.device, rules: Mapping[str, Init], seed: int, prefix: str = ""
) -> None:
    """Storage on `device` for `module`'s meta parameters (after sharding: this rank's rows
    only), then their first values by `rules` (keys `prefix` + name). Buffers keep their
    values."""
    kept = {name: buf.detach().clone() for name, buf in module.named_buffers() if not buf.is_meta}
    first: dict[int, str] = {}
    ties = []  # (alias, name it shares its parameter with): a tied output projection
    for name, param in module.named_parameters(remove_duplicate=False):
        if id(param) in first:
            ties.append((name, first[id(param)]))
        first.setdefault(id(param), name)
    module.to_empty(device=device)
    for alias, name in ties:  # a plain tensor's to_empty makes one tensor per module: tie again
        shared = module.get_parameter(name)
        if module.get_parameter(alias) is not shared:
            owner, _, attr = alias.rpartition(".")
            setattr(module.get_submodule(owner), attr, shared)
    with torch.no_grad():
        for name, value in kept.items():
            module.get_buffer(name).copy_(value)
    initialise(((prefix + name, p) for name, p in module.named_parameters()), rules, seed)
