"""Facts about Muon's options, in torch-free rows: the variant of its update (`MuonVariant`:
Muon, NorMuon), the orthogonalising iteration (`NsMethod`: the fixed quintic, Polar Express)
with its coefficients, the precision it runs in, how it meets sharded parameters (FSDP2, HSDP)
and its rule under μP. `zoo.tasks.muon` runs what these rows state; `OptimConfig` checks the
keys with `check_muon`.

Sharding: a sharded rank holds some rows of each matrix, and Newton-Schulz needs the whole
matrix. zoo gathers each matrix's momentum-corrected update on every rank of its shard group
(DTensor.full_tensor, one all-gather per matrix and step), orthogonalises it whole on each rank
and keeps its own rows of the result (a local slice, no second exchange): the update is the
one a single process computes from the same gradient, at the cost of every rank of a group
running every matrix's iteration. torchtitan (Dion's Muon) and OLMo-core instead give each
matrix to one rank and scatter the result, which divides that work by the group's size; at the
widths zoo trains on gloo the all-gather dominates either way, and the gathered form stays
exactly one process's arithmetic (tests/training/distributed/test_fsdp_muon.py).

μP (Yang, Simon & Bernstein 2023, "A Spectral Condition for Feature Learning", condition 2;
Bernstein & Newhouse 2024, "Modular Duality in Deep Learning"): a hidden matrix's update must
have spectral norm Θ(sqrt(fan_out / fan_in)) as the width grows. Muon's orthogonalised update
has every singular value near 1, so its shape factor alone decides the width behaviour:
optim.adjust_lr_fn=original (sqrt(max(1, fan_out / fan_in)), Jordan et al. 2024) is the
spectral rule itself and takes no width correction; match_rms_adamw (0.2 sqrt(max(fan_out,
fan_in)), Liu et al. 2025) grows as sqrt(m) with the width multiplier m, so under μP its rate is
x 1/sqrt(m) and its decay x sqrt(m) (its factor then equals the base model's, and lr x decay per
step stays the base model's, as μP's AdamW rule keeps it). Every other parameter keeps μP's
AdamW rules (`zoo.models.parametrization`): embeddings, output head, norms and biases, and the
hidden matrices Muon does not take (a head transform, MoE experts) at lr / m, decay x m."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError


class MuonVariant(Choice):
    muon = "muon"  # Jordan et al. 2024
    normuon = "normuon"  # Li et al. 2025: a second moment per row after orthogonalisation


class NsMethod(Choice):
    quintic = "quintic"  # Jordan et al. 2024: (3.4445, -4.7750, 2.0315) at every iteration
    polar_express = "polar_express"  # Amsel et al. 2025: each iteration's optimal quintic


class NsPrecision(Choice):
    bfloat16 = "bfloat16"  # torch.optim.Muon's and the papers' choice
    float32 = "float32"  # the iteration in float32 (two runs agree to float32 rounding)


@dataclass(frozen=True)
class VariantFacts:
    """One variant's row: what it does, its paper, and the numbers of state it keeps per row of
    each matrix beside Muon's momentum buffer (`row_state`, float32)."""

    what: str
    paper: str
    row_state: int


MUON_VARIANTS: dict[MuonVariant, VariantFacts] = {
    MuonVariant.muon: VariantFacts(
        what="momentum, then the orthogonalised update scaled by optim.adjust_lr_fn",
        paper="Jordan et al. 2024; Liu et al. 2025",
        row_state=0,
    ),
    MuonVariant.normuon: VariantFacts(
        what="Muon whose orthogonalised update O is divided row by row by sqrt(v) (v: an EMA, decay "
        "optim.normuon_beta2, of each row's mean square of O), then rescaled to O's Frobenius norm; "
        "then optim.adjust_lr_fn as Muon",
        paper="Li et al. 2025, 'NorMuon: Making Muon more efficient and scalable' (Algorithm 1 and its reference code)",
        row_state=1,
    ),
}


# Jordan et al. 2024: the quintic's coefficients, the same at every iteration (torch.optim.Muon's)
QUINTIC = (3.4445, -4.7750, 2.0315)
# Amsel et al. 2025, "The Polar Express: Optimal Matrix Sign Methods and Their Application to the
# Muon Algorithm": the optimal composition for l = 1e-3 over 10 iterations, cushion 0.02, each
# polynomial but the last divided by the safety factor 1.01 (a, b, c -> a/1.01, b/1.01^3,
# c/1.01^5), as the authors' polar_express.py computes it; past 10 iterations the last repeats
POLAR_EXPRESS = (
    (8.237312490495555, -23.157747414558198, 16.680568411445915),
    (4.082441999064838, -2.893047735332589, 0.5252849256975651),
    (3.9263479922546547, -2.854746803476529, 0.5318022422894988),
    (3.2982187133085152, -2.424541981026706, 0.48632008358844064),
    (2.297036943455257, -1.63662558125903, 0.4002628455953626),
    (1.8763805351440408, -1.2347896577722248, 0.35891887501668485),
    (1.856442348572721, -1.2132449881149632, 0.3568003487930794),
    (1.8564367725311115, -1.2132398983353458, 0.3568007177502274),
    (1.8564311670389742, -1.2132289082904242, 0.3567953310203733),
    (1.8749954775665585, -1.249990955154933, 0.3749954775883744),
)


@dataclass(frozen=True)
class IterationFacts:
    """One orthogonalising iteration's row: X <- a X + b (X X^T) X + c (X X^T)^2 X from
    X0 = G / (||G||_F x `safety` + `eps`) (torch.optim.Muon's quintic: G / max(||G||_F, 1e-7)),
    with `coefficients(steps)`'s (a, b, c) at each of optim.ns_steps iterations."""

    what: str
    paper: str
    table: tuple[tuple[float, float, float], ...]
    safety: float = 1.0

    def coefficients(self, steps: int) -> list[tuple[float, float, float]]:
        """(a, b, c) of each of `steps` iterations; past the table's end its last repeats."""
        return [self.table[min(i, len(self.table) - 1)] for i in range(steps)]


NS_METHODS: dict[NsMethod, IterationFacts] = {
    NsMethod.quintic: IterationFacts(
        what="Newton-Schulz with one quintic at every iteration (singular values end in about 0.7-1.2)",
        paper="Jordan et al. 2024",
        table=(QUINTIC,),
    ),
    NsMethod.polar_express: IterationFacts(
        what="each iteration's minimax-optimal quintic for the sign function (singular values converge to 1)",
        paper="Amsel et al. 2025, 'The Polar Express' (Algorithm 1, coefficients of its reference code)",
        table=POLAR_EXPRESS,
        safety=1.01,
    ),
}

# the keys of the options above (OptimConfig fields, read by optim=muon's row)
MUON_OPTION_KEYS = ("muon_variant", "ns_method", "ns_precision", "normuon_beta2")
NORMUON_BETA2 = 0.95  # Li et al. 2025's default


def muon_width_scales(adjust_lr_fn: str, width_mult: float) -> tuple[float, float]:
    """(learning-rate multiplier, weight-decay multiplier) of a hidden matrix Muon updates in a μP
    model of width multiplier `width_mult` (the rule in this module's docstring): (1, 1) under
    adjust_lr_fn=original, (1/sqrt(m), sqrt(m)) under match_rms_adamw."""
    if adjust_lr_fn == "original":
        return 1.0, 1.0
    return 1.0 / math.sqrt(width_mult), math.sqrt(width_mult)


def check_muon(cfg: Any) -> None:
    """OptimConfig's Muon options (their enums already parsed): normuon_beta2 in [0, 1) and read
    by optim.muon_variant=normuon only."""
    if isinstance(cfg.normuon_beta2, bool) or not 0.0 <= cfg.normuon_beta2 < 1.0:
        raise ConfigError(f"optim.normuon_beta2 must be in [0, 1), got {cfg.normuon_beta2}")
    if cfg.normuon_beta2 != NORMUON_BETA2 and cfg.muon_variant != MuonVariant.normuon:
        raise ConfigError(
            f"optim.normuon_beta2 only applies to optim.muon_variant=normuon (got {cfg.muon_variant.value}); "
            "drop it or set optim.muon_variant=normuon"
        )


__all__ = [
    "MUON_OPTION_KEYS",
    "MUON_VARIANTS",
    "NORMUON_BETA2",
    "NS_METHODS",
    "IterationFacts",
    "MuonVariant",
    "NsMethod",
    "NsPrecision",
    "VariantFacts",
    "check_muon",
    "muon_width_scales",
]
