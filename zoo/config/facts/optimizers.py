"""Facts about each optimizer, in one torch-free table: what it is, where it comes from, the
`OptimConfig` keys it reads, the optimizer state it keeps per parameter (in numbers of the
parameter's dtype) and what it refuses. `OptimConfig` refuses a key the chosen kind does not
read from these rows; the host-memory check (`zoo.training.machine`) weighs the state from
them; `zoo.tasks.optim.OPTIMIZERS` builds each kind from a function keyed by the same enum,
and `tests/config/facts/test_optimizer_table.py` keeps the two in step."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.config.choice import Choice


class OptimizerKind(Choice):
    adamw = "adamw"  # Loshchilov & Hutter 2019
    adam = "adam"  # Kingma & Ba 2015 (weight decay coupled to the gradient; Vaswani et al.)
    muon = "muon"  # Jordan et al. 2024; Liu et al. 2025: the hidden matrices, AdamW for the rest


# the keys every kind reads: the peak rate and the decoupled (or, for adam, coupled) decay
COMMON = ("lr", "weight_decay")
ADAM_KEYS = ("betas", "eps", "implementation")
MUON_KEYS = ("muon_lr", "momentum", "nesterov", "ns_steps", "adjust_lr_fn")


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
    - `refuses`: what it cannot run with, each refused on one line before any weight exists
      (`zoo.config.schema.validate`).
    """

    what: str
    paper: str
    params: tuple[str, ...]
    state: int
    hidden_only: bool = False
    refuses: tuple[str, ...] = ()

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
        what="torch.optim.Muon (momentum, then Newton-Schulz orthogonalisation of the update) for the "
        "hidden layers' 2-D matrices, each fused matrix (qkv_proj, a gated w_in) whole; AdamW for "
        "embeddings, output head, norms and biases",
        paper="Jordan et al. 2024 (Muon); Liu et al. 2025, 'Muon is Scalable for LLM Training'",
        params=(*COMMON, *ADAM_KEYS, *MUON_KEYS),
        state=1,
        hidden_only=True,
        refuses=(
            "trainer.strategy=fsdp or hsdp (Newton-Schulz needs each whole matrix; a rank holds a shard)",
            "model.parametrization=mup (muP's per-layer rates are Adam's; Muon scales by shape)",
        ),
    ),
}


def optimizer_readers(param: str) -> tuple[OptimizerKind, ...]:
    """The optimizers that read `OptimConfig` key `param`."""
    return tuple(kind for kind, facts in OPTIMIZER_FACTS.items() if param in facts.params)


__all__ = ["OPTIMIZER_FACTS", "OptimizerFacts", "OptimizerKind", "optimizer_readers"]
