"""Facts about each optimizer, in one torch-free table: what it is, where it comes from, the
`OptimConfig` keys it reads, the optimizer state it keeps per parameter (in numbers of the
parameter's dtype) and what it refuses. `OptimConfig` refuses a key the chosen kind does not
read from these rows; the host-memory check (`zoo.training.machine`) weighs the state from
them; `zoo.tasks.optim.OPTIMIZERS` builds each kind from a function keyed by the same enum,
and `tests/config/facts/test_optimizer_table.py` keeps the two in step."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.config.choice import Choice
from zoo.config.facts.muon import MUON_OPTION_KEYS


class OptimizerKind(Choice):
    adamw = "adamw"  # Loshchilov & Hutter 2019
    adam = "adam"  # Kingma & Ba 2015 (weight decay coupled to the gradient; Vaswani et al.)
    muon = "muon"  # Jordan et al. 2024; Liu et al. 2025: the hidden matrices, AdamW for the rest


# the keys every kind reads: the peak rate and the decoupled (or, for adam, coupled) decay
COMMON = ("lr", "weight_decay")
ADAM_KEYS = ("betas", "eps", "implementation")
MUON_KEYS = ("muon_lr", "momentum", "nesterov", "ns_steps", "adjust_lr_fn", *MUON_OPTION_KEYS)


@dataclass(frozen=True)
class RunShape:
    """What an optimizer's refusals look at, known before any weight exists: the strategy
    (`strategy_key`=`strategy`: zoo-train's trainer.strategy, zoo-plan's strategy), whether it
    shards each parameter over ranks (fsdp, hsdp), and model.parametrization's value (None
    where the caller does not know it yet)."""

    strategy: str | None = None
    sharded: bool = False
    parametrization: str | None = None
    strategy_key: str = "trainer.strategy"


@dataclass(frozen=True)
class Refusal:
    """One thing an optimizer cannot run with: `applies(shape)` says whether `shape` is it;
    `says` is the one-line refusal, formatted with the shape's fields."""

    applies: Callable[[RunShape], bool]
    says: str

    def message(self, shape: RunShape) -> str:
        return self.says.format(strategy=shape.strategy, strategy_key=shape.strategy_key)


@dataclass(frozen=True)
class OptimizerFacts:
    """One optimizer's row.

    - `what`, `paper`: what it does and where it comes from.
    - `params`: the `OptimConfig` keys it reads besides `kind`; setting a key no row of the
      chosen kind reads away from its default is refused, so `optim=adamw optim.momentum=0.9`
      does not silently do nothing.
    - `state`: numbers of optimizer state per parameter it updates with its own rule
      (Adam's two moments; Muon's one momentum buffer).
    - `hidden_only`: it updates only the 2-D matrices of the hidden layers (attention and FFN
      projections); every other parameter (embeddings, output head, norms, biases) is updated
      by AdamW, with AdamW's `state`.
    - `refuses`: what it cannot run with, each a `Refusal` (a predicate on the run's
      `RunShape` and its one-line message) that zoo-train's validation
      (`zoo.config.schema.validate`) and zoo-plan (`zoo.plan.options`, `zoo.plan.planner`) ask
      before any weight exists.
    """

    what: str
    paper: str
    params: tuple[str, ...]
    state: int
    hidden_only: bool = False
    refuses: tuple[Refusal, ...] = ()

    def state_per_parameter(self, hidden_matrix: bool) -> int:
        """Numbers of state a parameter holds: a hidden matrix under this optimizer's own rule,
        or any other parameter (AdamW's two moments where this optimizer takes hidden
        matrices only)."""
        if self.hidden_only and not hidden_matrix:
            return OPTIMIZER_FACTS[OptimizerKind.adamw].state
        return self.state


OPTIMIZER_FACTS: dict[OptimizerKind, OptimizerFacts] = {
    OptimizerKind.adamw: OptimizerFacts(
        what="Adam with decoupled weight decay (never on norms, biases or embeddings)",
        paper="Loshchilov & Hutter 2019",
        params=(*COMMON, *ADAM_KEYS),
        state=2,
    ),
    OptimizerKind.adam: OptimizerFacts(
        what="Adam, weight decay added to the gradient (L2)",
        paper="Kingma & Ba 2015; Vaswani et al. 2017 with scheduler=inverse_sqrt",
        params=(*COMMON, *ADAM_KEYS),
        state=2,
    ),
    OptimizerKind.muon: OptimizerFacts(
        what="Muon (momentum, then Newton-Schulz orthogonalisation of the update; torch.optim.Muon's "
        "arithmetic by default, NorMuon and Polar Express as options: zoo.config.facts.muon) for the "
        "hidden layers' 2-D matrices, each fused matrix (qkv_proj, a gated w_in) whole; AdamW for "
        "embeddings, output head, norms and biases. Under FSDP2 and HSDP each matrix's update is "
        "gathered whole for the iteration and each rank keeps its rows of the result; under μP the "
        "hidden matrices follow the spectral rule (zoo.config.facts.muon.muon_width_scales)",
        paper="Jordan et al. 2024 (Muon); Liu et al. 2025, 'Muon is Scalable for LLM Training'; "
        "Li et al. 2025 (NorMuon); Amsel et al. 2025 (Polar Express)",
        params=(*COMMON, *ADAM_KEYS, *MUON_KEYS),
        state=1,
        hidden_only=True,
    ),
}


def optimizer_readers(param: str) -> tuple[OptimizerKind, ...]:
    """The optimizers that read `OptimConfig` key `param`."""
    return tuple(kind for kind, facts in OPTIMIZER_FACTS.items() if param in facts.params)


def read_by(kind: OptimizerKind, settings: Mapping[str, Any]) -> dict[str, Any]:
    """`kind` and those of `settings` ({OptimConfig key: value}) that its row reads: what a tool
    that holds settings for every optimizer (zoo-plan's implementation, zoo-bench's betas and
    eps) passes to `OptimConfig`, which refuses a key the kind does not read."""
    params = OPTIMIZER_FACTS[kind].params
    return {"kind": kind, **{key: value for key, value in settings.items() if key in params}}


def optimizer_refusal(kind: OptimizerKind, shape: RunShape) -> str | None:
    """The first of `kind`'s refusals that applies to `shape`, as its one line; None if none does."""
    for refusal in OPTIMIZER_FACTS[kind].refuses:
        if refusal.applies(shape):
            return refusal.message(shape)
    return None


__all__ = [
    "OPTIMIZER_FACTS",
    "OptimizerFacts",
    "OptimizerKind",
    "Refusal",
    "RunShape",
    "optimizer_readers",
    "optimizer_refusal",
    "read_by",
]
