"""How a parameter starts, declared torch-free: the `Init` each row of `zoo.config.facts`
carries for its module's own parameters, by name (`Starts`), so that `zoo.nn` declares a new
kind's parameters from its row and `zoo.models` initialises them without a table of module
classes.

A declaration is one of: a normal draw (Normal(0, std), std given or, by default,
`model.init_std`), zeros, ones, a constant, log(1..n) along the last dimension (Mamba 2's
A_log: S4D-Real, a_n = -n) or log(Uniform(low, high)) per element (Gated DeltaNet's A_log).
`zoo.models.init` draws the values; a module carries its row's `Starts` as its `starts`
attribute (`zoo.nn.norm.build_norm`,
`zoo.nn.position.base.PositionScheme.starts`, `zoo.nn.moe.Experts`), and
`zoo.models.base.ZooModel.init_rules` reads it for the module's own (not its children's)
parameters; torch's own `nn.Linear` and `nn.Embedding` keep the general rules there."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from zoo.config.choice import Choice


class Start(Choice):
    normal = "normal"  # Normal(0, std), from the parameter's own generator
    zeros = "zeros"
    ones = "ones"
    constant = "constant"  # every element `value`
    log_arange = "log_arange"  # log(1), log(2), ..., log(n) along the last dimension (S4D-Real's A = -(1..n))
    log_uniform = "log_uniform"  # log of Uniform(low, high), from the parameter's own generator


@dataclass(frozen=True)
class Init:
    """How one parameter starts: `start`, with `std` for a normal draw (None: the model's
    `init_std`, filled in by `resolved`) and `value` for a constant."""

    start: Start
    std: float | None = None
    value: float = 0.0
    low: float = 0.0  # log_uniform: the range the exponent of each element is drawn from
    high: float = 0.0

    def __post_init__(self) -> None:
        if self.start == Start.normal and self.std is not None and not self.std > 0:
            raise ValueError(f"a normal start needs a std > 0, got {self.std}")
        if self.start != Start.normal and self.std is not None:
            raise ValueError(f"a {self.start.value} start takes no std, got {self.std}")
        if self.start != Start.constant and self.value != 0.0:
            raise ValueError(f"a {self.start.value} start takes no value, got {self.value}")
        if not math.isfinite(self.value):
            raise ValueError(f"a constant start needs a finite value, got {self.value}")
        if self.start == Start.log_uniform and not 0 < self.low < self.high:
            raise ValueError(f"a log_uniform start needs 0 < low < high, got {self.low} and {self.high}")
        if self.start != Start.log_uniform and (self.low or self.high):
            raise ValueError(f"a {self.start.value} start takes no range, got {self.low} and {self.high}")

    def resolved(self, init_std: float) -> Init:
        """This start with a normal draw's std filled in from the model's `init_std`."""
        if self.start == Start.normal and self.std is None:
            return Init(Start.normal, init_std)
        return self


# {a module's own parameter name: how it starts}; a name the module does not hold is skipped
# (a LayerNorm without β)
Starts = Mapping[str, Init]

ZEROS = Init(Start.zeros)
ONES = Init(Start.ones)
NORMAL = Init(Start.normal)  # std: model.init_std


def normal(std: float | None = None) -> Init:
    """Normal(0, std); None: the model's `init_std`."""
    return Init(Start.normal, std)


def log_uniform(low: float, high: float) -> Init:
    """log(Uniform(low, high)) per element (Mamba's and Gated DeltaNet's A_log: decay rates spread
    over heads)."""
    return Init(Start.log_uniform, low=low, high=high)


def constant(value: float) -> Init:
    return Init(Start.constant, value=value)


__all__ = ["NORMAL", "ONES", "ZEROS", "Init", "Start", "Starts", "constant", "log_uniform", "normal"]
