"""Power and design: from the seed spread a sweep showed, the smallest difference its design
could detect, and the seeds per arm a difference would need (`zoo-compare plan=PILOT delta=D`).

A report compares arms by Student's t (`zoo.compare.stats.difference`): paired over seeds when
both arms ran the same seeds, Welch's otherwise. Its power against a true difference δ, at a
two-sided α = 0.05, is that of the noncentral t (`scipy.stats.nct`):

    paired, n seeds:        df = n − 1,   ncp = δ / (σ_d · √(1/n))
    two arms of n seeds:    df = 2n − 2,  ncp = δ / (σ · √(2/n))
    power = P(T' > t(1 − α/2, df)) + P(T' < −t(1 − α/2, df)),  T' ~ t(df, ncp)

σ is the pooled within-arm standard deviation over seeds (each arm's sample variance weighted by
its n − 1), σ_d the pooled standard deviation of the paired differences (arm − baseline, seed by
seed): pairing removes the noise two arms share through their seed, so σ_d is usually below
σ·√2. Welch's test at equal seeds and spreads is Student's, which the two-arm line is. The
smallest detectable difference is the δ at which the power is POWER (80%); the seeds per arm a
difference needs is the smallest n (≥ 2) whose power reaches it. α is per comparison: a
family adjusted by Holm or Bonferroni needs more. Both read the spread as if it were known,
which on 3 seeds it is not (on 2 degrees of freedom its 95% interval runs from 0.52 to 6.3 times it): the
answer is a planning figure, not a guarantee.

For an equivalence margin m (two one-sided tests, each at α, true difference 0) the seeds per
arm are the smallest n with t(1 − α, df) + t(1 − β/2, df) ≤ m / se, se as above (Chow, Shao &
Wang 2008, "Sample Size Calculations in Clinical Research", §3.2): the standard approximation,
which ignores the spread's own uncertainty."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from zoo.compare.stats import Difference

ALPHA = 0.05
POWER = 0.8
MOST_SEEDS = 100_000  # a difference needing more seeds than this is "beyond any sweep"


def _se(sd: float, n: int, paired: bool) -> float:
    return sd * math.sqrt(1 / n) if paired else sd * math.sqrt(2 / n)


def _df(n: int, paired: bool) -> int:
    return n - 1 if paired else 2 * n - 2


def power(delta: float, sd: float, n: int, paired: bool, alpha: float = ALPHA) -> float:
    """The probability that the two-sided t-test at `alpha` rejects "no difference" when the true
    difference is `delta`, the seeds' standard deviation `sd` (of the paired differences when
    `paired`) and each arm runs `n` seeds."""
    from scipy import stats

    if n < 2:
        raise ValueError("a t-test needs 2 or more seeds per arm")
    df = _df(n, paired)
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    ncp = abs(delta) / _se(sd, n, paired)
    found = float(stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp))
    return found if math.isfinite(found) else _integrated(crit, df, ncp)


def _integrated(crit: float, df: int, ncp: float) -> float:
    """P(|T'| > crit) for T' = (Z + ncp) / sqrt(V / df), V ~ χ²(df), by integrating the normal's
    tails over V: where SciPy's noncentral t gives NaN (1 degree of freedom, a large ncp)."""
    from scipy import integrate, stats

    def tails(v: float) -> float:
        scaled = crit * math.sqrt(v / df)
        return float((stats.norm.sf(scaled - ncp) + stats.norm.cdf(-scaled - ncp)) * stats.chi2.pdf(v, df))

    return min(1.0, float(integrate.quad(tails, 0, math.inf, limit=200)[0]))


def detectable(sd: float, n: int, paired: bool, target: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest true difference the design (`n` seeds per arm, the test `paired` names) detects
    with probability `target`."""
    from scipy.optimize import brentq

    high = _se(sd, n, paired)
    while power(high, sd, n, paired, alpha) < target:
        high *= 2
    return float(brentq(lambda d: power(d, sd, n, paired, alpha) - target, 0.0, high, xtol=1e-12 * high))


def seeds_for(delta: float, sd: float, paired: bool, target: float = POWER, alpha: float = ALPHA) -> int | None:
    """The fewest seeds per arm (≥ 2) whose test detects `delta` with probability `target`; None
    beyond MOST_SEEDS."""
    if delta == 0:
        return None
    low, high = 2, 2
    while power(delta, sd, high, paired, alpha) < target:
        if high >= MOST_SEEDS:
            return None
        low, high = high, min(high * 2, MOST_SEEDS)
    if power(delta, sd, low, paired, alpha) >= target:
        return low
    while high - low > 1:  # power grows with n: bisect for the first n that reaches the target
        mid = (low + high) // 2
        low, high = (mid, high) if power(delta, sd, mid, paired, alpha) < target else (low, mid)
    return high


def seeds_for_equivalence(
    margin: float, sd: float, paired: bool, target: float = POWER, alpha: float = ALPHA
) -> int | None:
    """The fewest seeds per arm (≥ 2) with which two one-sided tests at `alpha` show equivalence
    within ±`margin` with probability about `target` when the true difference is 0 (the
    approximation of the module docstring); None beyond MOST_SEEDS."""
    from scipy import stats

    for n in range(2, MOST_SEEDS + 1):
        df = _df(n, paired)
        need = float(stats.t.ppf(1 - alpha, df) + stats.t.ppf(1 - (1 - target) / 2, df))
        if margin / _se(sd, n, paired) >= need:
            return n
    return None


def pooled_sd(groups: list[list[float]]) -> tuple[float, int] | None:
    """(pooled standard deviation, its degrees of freedom) over groups of seeds: each group's
    sample variance weighted by its n − 1; None when no group has 2 values."""
    df = sum(len(g) - 1 for g in groups if len(g) > 1)
    if df == 0:
        return None
    ss = 0.0
    for g in groups:
        if len(g) > 1:
            mean = sum(g) / len(g)
            ss += sum((v - mean) ** 2 for v in g)
    return math.sqrt(ss / df), df


def paired_differences(arms: list[dict[Any, float]], baseline: dict[Any, float]) -> list[list[float]]:
    """Each arm's seed-by-seed differences to the baseline, for arms that ran the baseline's seeds
    (2 or more, as `zoo.compare.stats.difference` pairs them); [] for any other arm."""
    out = []
    for values in arms:
        shared = set(values) & set(baseline)
        if len(shared) >= 2 and len(shared) == len(values) == len(baseline):
            out.append([values[s] - baseline[s] for s in shared])
    return out


@dataclass
class Design:
    """What a comparison of arms at one size could detect: the spread, the test, the seeds."""

    sd: float  # pooled within-arm standard deviation over seeds
    df: int  # its degrees of freedom
    paired: bool  # every comparison paired over seeds: the test's spread is `sd_test`
    sd_test: float  # the spread the test sees: of the paired differences, or `sd`
    seeds: int  # seeds per arm (the fewest of any arm compared)
    detectable: float  # the smallest true difference found with POWER probability
    unresolved: float | None = None  # the largest |difference| whose 95% interval spans 0
    unresolved_name: str = ""
    needed: int | None = None  # seeds per arm that difference needs

    @property
    def own_spread_wider(self) -> bool:
        """The largest unresolved difference needs no more seeds than the design has: its own
        seeds spread more than the pooled σ says."""
        return self.unresolved is not None and self.needed is not None and self.needed <= self.seeds

    def needed_cell(self) -> str:
        """The seeds the largest unresolved difference needs, as a table cell: "–" with none; the
        count marked where it is no more than the design has (its own seeds spread wider than σ)."""
        if self.unresolved is None:
            return "–"
        if self.needed is None:
            return f"> {MOST_SEEDS:,}"
        if self.own_spread_wider:
            return f"{self.needed}: σ understates its own spread"
        return str(self.needed)

    def sentence(self, metric: str) -> str:
        test = (
            f"paired t-test over seeds (σ of the paired differences {self.sd_test:.4f})"
            if self.paired
            else "t-test of two arms' seeds"
        )
        text = (
            f"From the seeds' spread (pooled within-arm σ = {self.sd:.4f} {metric}, {self.df} df), "
            f"{self.seeds} seeds per arm and the {test}, this design detects a true difference of "
            f"{self.detectable:.4f} with {POWER:.0%} probability at α = {ALPHA} (two-sided, per comparison)."
        )
        if self.unresolved is None:
            return text + " No difference's 95% interval spans 0."
        if self.own_spread_wider:  # above the detectable difference, yet unresolved
            return (
                text + f" The largest unresolved difference ({self.unresolved_name}, {self.unresolved:+.4f}) is "
                f"above that: at the pooled spread {self.seeds} seeds would detect it, so its own seeds vary "
                "more than the pooled σ says, and this power is an average over arms that does not hold for it."
            )
        need = f"{self.needed} seeds per arm" if self.needed is not None else f"more than {MOST_SEEDS:,} seeds per arm"
        return (
            text + f" The largest unresolved difference ({self.unresolved_name}, {self.unresolved:+.4f}) would need "
            f"{need} to be detected with {POWER:.0%} probability, were it the true one."
        )


def design(
    others: list[dict[Any, float]], baseline: dict[Any, float], diffs: list[tuple[str, Difference | None]]
) -> Design | None:
    """The design of a comparison of the arms `others` ({seed: final metric} each) with
    `baseline`, and the differences the report found (named); None without a spread (no arm
    with 2 seeds, or seeds that agree exactly)."""
    values = [baseline, *others]
    pooled = pooled_sd([list(v.values()) for v in values])
    counts = [len(v) for v in values if len(v) > 1]
    if pooled is None or not counts or not others:
        return None
    sd, df = pooled
    pairs = paired_differences(others, baseline)
    paired = len(pairs) == len(others)
    sd_test = sd
    if paired:
        spread = pooled_sd(pairs)
        if spread is None or spread[0] == 0:
            paired = False
        else:
            sd_test = spread[0]
    if sd_test == 0:
        return None
    seeds = min(counts)
    found = Design(sd, df, paired, sd_test, seeds, detectable(sd_test, seeds, paired))
    open_ = [
        (name, d)
        for name, d in diffs
        if d is not None and d.low is not None and d.high is not None and d.low <= 0 <= d.high
    ]
    if open_:
        name, d = max(open_, key=lambda nd: abs(nd[1].mean))
        found.unresolved, found.unresolved_name = d.mean, name
        found.needed = seeds_for(d.mean, sd_test, paired)
    return found
