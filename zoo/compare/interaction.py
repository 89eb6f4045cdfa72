"""Does an arm's difference to the baseline change with size (`zoo-compare SWEEP scale=KEY`)?

Decision accuracy (`zoo.compare.transfer`) asks whether an ordering holds at the largest size;
this asks by how much the difference itself moves, with an interval: "the lead shrinks with
size" or "the gain grows" is a claim about a change of a difference (an interaction of arm and
size), and needs its own test.

For each arm other than the baseline and each smaller size s at which both have a result, the
change from s to the largest size L at which both have one:

    change = (arm − baseline at L) − (arm − baseline at s)

Each difference is the mean over seeds of arm − baseline, paired by seed where both ran the same
seeds (with tune=: each seed's held-out value, as every other comparison of the report reads
it). The runs at the two sizes are separate, so the change's variance is the sum of the two
differences' (each the variance of its per-seed differences over their count when paired, else
the two arms' variances over their counts), and its 95% interval is Student's t on the
Welch–Satterthwaite degrees of freedom (Welch 1947; with paired seeds at both sizes this is
`scipy.stats.ttest_ind(equal_var=False)` on the two sizes' per-seed differences). Treating the
sizes as independent is an assumption: the same seed at two sizes shares its data order, so the
two differences may be correlated (positively: this interval is wider than it need be;
negatively: narrower). Every change
is one test of one family: Holm's p-values and adjusted intervals (`zoo.compare.verdict.adjust`).
An interval that spans 0 does not say the difference is the same at both sizes; it says the
design cannot tell (`equivalence=` is the test of sameness)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from zoo.compare.scaled_arms import ScaledArm, Size
from zoo.compare.stats import FEW_SEEDS, Difference, mean_std, no_spread, t_quantile
from zoo.compare.tune import _order
from zoo.compare.verdict import LEVEL, Family, adjust, label

# why a change has no interval when nothing varies (the family's sentence says it)
NO_SPREAD = "zero spread: the arm's difference to the baseline is the same on every seed at both sizes"


@dataclass
class Change:
    """One arm's difference to the baseline at a smaller size, at the largest, and the change."""

    arm: str  # the arm's label
    size: Any  # the smaller size
    largest: Any
    small: float  # arm − baseline at `size` (mean over seeds)
    large: float  # arm − baseline at `largest`
    change: Difference  # large − small, with its interval


@dataclass
class Changes:
    rows: list[Change]
    family: Family


def _parts(arm: Size, base: Size) -> tuple[float, list[tuple[float, int]], list[float]] | None:
    """(arm − baseline, [(variance, count)] of its parts, the values) at one size; None without
    2 seeds on each side. Paired when both ran the same seeds: one part, the per-seed differences."""
    a, b = arm.seed_values(), base.seed_values()
    shared = set(a) & set(b)
    if len(shared) >= 2 and len(shared) == len(a) == len(b):
        diffs = [a[s] - b[s] for s in sorted(shared, key=str)]
        mean, sd = mean_std(diffs)
        return mean, [(sd**2, len(diffs))], [*a.values(), *b.values()]
    if len(a) < 2 or len(b) < 2:
        return None
    (ma, sa), (mb, sb) = mean_std(list(a.values())), mean_std(list(b.values()))
    return ma - mb, [(sa**2, len(a)), (sb**2, len(b))], [*a.values(), *b.values()]


def change_between(arm_small: Size, base_small: Size, arm_large: Size, base_large: Size) -> Difference | None:
    """(arm − baseline at the larger size) − (the same at the smaller) with its 95% Welch
    interval and two-sided p-value; None when a side has no mean."""
    if not all(s.seed_values() for s in (arm_small, base_small, arm_large, base_large)):
        return None
    small, large = _parts(arm_small, base_small), _parts(arm_large, base_large)
    if small is None or large is None:
        mean = _mean_difference(arm_large, base_large) - _mean_difference(arm_small, base_small)
        return Difference(mean, None, None, "welch", flag=FEW_SEEDS)
    mean = large[0] - small[0]
    parts = small[1] + large[1]
    se2 = sum(v / n for v, n in parts)
    if no_spread(math.sqrt(se2), small[2] + large[2]):
        return Difference(mean, None, None, "welch", flag=NO_SPREAD)
    df = se2**2 / sum((v / n) ** 2 / (n - 1) for v, n in parts if v > 0)
    from scipy import stats

    se = math.sqrt(se2)
    half = t_quantile(1 - (1 - LEVEL) / 2, df) * se
    p = float(2 * stats.t.sf(abs(mean) / se, df))
    return Difference(mean, mean - half, mean + half, "welch", df=df, p=p)


def _mean_difference(arm: Size, base: Size) -> float:
    return mean_std(list(arm.seed_values().values()))[0] - mean_std(list(base.seed_values().values()))[0]


def changes(arms: list[ScaledArm], baseline: ScaledArm, key: str) -> Changes | None:
    """Every arm's change from each smaller size to the largest it shares with the baseline, one
    family; None with fewer than 2 shared sizes for every arm."""
    base = {repr(s.value): s for s in baseline.scored}
    rows: list[Change] = []
    for arm in arms:
        if arm is baseline:
            continue
        shared = sorted((s for s in arm.scored if repr(s.value) in base), key=lambda s: _order(s.value))
        if len(shared) < 2:
            continue
        top = shared[-1]
        for size in shared[:-1]:
            found = change_between(size, base[repr(size.value)], top, base[repr(top.value)])
            if found is None:
                continue
            rows.append(
                Change(
                    label(arm),
                    size.value,
                    top.value,
                    _mean_difference(size, base[repr(size.value)]),
                    _mean_difference(top, base[repr(top.value)]),
                    found,
                )
            )
    if not rows:
        return None
    what = f"the change of each arm's difference to the baseline from each smaller {key} to the largest"
    family = adjust(what, [(f"{c.arm}: {key}={c.size} to {c.largest}", c.change) for c in rows])
    family.read_by = ""  # no verdict reads them: the table's adjusted column does
    return Changes(rows, family)
