"""Mean, spread and a 95% confidence interval for a difference of means, by SciPy's t-tests.

The interval is Student's t: paired over seeds when both arms ran the same seeds (the
seed fixes initialisation and data order, so pairing removes that shared noise), Welch's
otherwise (Welch 1947): `scipy.stats.ttest_rel` and `ttest_ind(equal_var=False)` give the
p-value, the degrees of freedom and the interval, `scipy.stats.t` the quantiles the other
intervals of zoo-compare use. `holm` adjusts the p-values of several arms compared with one
baseline (Holm 1979), so that a family of comparisons keeps its 5% error rate: SciPy has no
Holm step-down (`scipy.stats.false_discovery_control` is Benjamini-Hochberg, which bounds the
false discovery rate, not the family's error rate), so it is written here. With 1 degree of
freedom (2 seeds) the t quantile is 12.7 and the interval hangs on which seeds happen to pair:
`FEW_DF` flags it. A difference whose seeds have no spread (identical runs, or values that
differ by the same amount on every seed) or that rests on fewer than 2 seeds on a side has no
interval and no p-value: its `flag` says why, and the reports show it on the row and in their
warnings (a zero-width interval would claim a certainty no design of a few seeds has).

SciPy's statistics take about half a second to import, so they are imported when first used:
a report that computes no interval does not pay for them."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample standard deviation; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var)


def t_quantile(p: float, df: float) -> float:
    """x with P(T <= x) = p for Student's t with `df` (> 0, not necessarily integer) degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(p, df))


FEW_DF = 2  # fewer degrees of freedom than this: an interval to flag, not to trust


@dataclass
class Difference:
    """arm - baseline: the mean difference, its 95% interval (None when undefined), the
    degrees of freedom behind it and the two-sided p-value of "no difference"; `p_holm` is set
    by `holm` when several arms face one baseline."""

    mean: float
    low: float | None
    high: float | None
    method: str  # "paired", "welch" or why no interval
    df: float | None = None
    p: float | None = None
    p_holm: float | None = None
    flag: str = ""  # why there is no interval or p-value: ZERO_SPREAD or FEW_SEEDS; "" when there is one
    adj_low: float | None = None  # the interval adjusted within the report's family (zoo.compare.verdict)
    adj_high: float | None = None

    @property
    def few_df(self) -> bool:
        """An interval on fewer than FEW_DF degrees of freedom (2 seeds: 1)."""
        return self.df is not None and self.df < FEW_DF

    def __str__(self) -> str:
        if self.low is None:
            return f"{self.mean:+.4f}" + (f" ({self.flag}: no interval)" if self.flag else "")
        flag = f" ({self.df:.2g} df)" if self.few_df else ""
        return f"{self.mean:+.4f} [{self.low:+.4f}, {self.high:+.4f}]{flag}"

    def p_text(self) -> str:
        """ "p = 0.012 (Holm 0.036)", or "–" without a test."""
        if self.p is None:
            return "–"
        text = f"{_p(self.p)}"
        return text + (f" (Holm {_p(self.p_holm)})" if self.p_holm is not None else "")


ZERO_SPREAD = "zero spread"
SPREAD_ROUNDING = 1e-12  # a spread below this fraction of the values is rounding, not seed noise


def no_spread(spread: float, values: Sequence[float]) -> bool:
    """A spread that is zero, or rounding error of the values (a constant offset between two
    arms leaves differences equal but for the last bits)."""
    return spread <= SPREAD_ROUNDING * max([1.0, *(abs(v) for v in values)])


FEW_SEEDS = "fewer than 2 seeds"


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def holm(diffs: Sequence[Difference | None]) -> None:
    """Set `p_holm` on every difference with a p-value: Holm's step-down adjustment over the
    m of them (sorted p_(1) <= ... <= p_(m): adjusted p_(i) = max over j <= i of
    min(1, (m - j + 1) · p_(j))). With fewer than 2 tests nothing is adjusted."""
    tested = sorted(((d.p, d) for d in diffs if d is not None and d.p is not None), key=lambda pd: pd[0])
    m = len(tested)
    if m < 2:
        return
    running = 0.0
    for i, (p, d) in enumerate(tested):
        running = max(running, min(1.0, (m - i) * p))
        d.p_holm = running


def difference(arm: dict, baseline: dict, level: float = 0.95) -> Difference | None:
    """Difference of means of two {seed: value} maps with a `level` confidence interval."""
    if not arm or not baseline:
        return None
    from scipy import stats

    shared = sorted(set(arm) & set(baseline), key=str)
    if len(shared) >= 2 and len(shared) == len(arm) == len(baseline):
        a, b = [arm[s] for s in shared], [baseline[s] for s in shared]
        mean, sd = mean_std([x - y for x, y in zip(a, b)])
        if no_spread(sd, a + b):
            return Difference(mean, None, None, "paired", df=len(shared) - 1, flag=ZERO_SPREAD)
        with _agreeing_seeds_allowed():
            test = stats.ttest_rel(a, b)
        return _tested(mean, test, "paired", level, df=len(shared) - 1)
    a, b = list(arm.values()), list(baseline.values())
    mean = mean_std(a)[0] - mean_std(b)[0]
    if len(a) < 2 or len(b) < 2:
        return Difference(mean, None, None, "one seed: no interval", flag=FEW_SEEDS)
    se = math.sqrt(mean_std(a)[1] ** 2 / len(a) + mean_std(b)[1] ** 2 / len(b))
    if no_spread(se, a + b):
        return Difference(mean, None, None, "welch", df=len(a) + len(b) - 2, flag=ZERO_SPREAD)
    with _agreeing_seeds_allowed():
        test = stats.ttest_ind(a, b, equal_var=False)
    return _tested(mean, test, "welch", level, df=float(test.df))


@contextmanager
def _agreeing_seeds_allowed() -> Iterator[None]:
    """SciPy warns of precision loss when a sample's values (nearly) agree. One arm's seeds may
    agree exactly (Welch's variance is then the other arm's alone), and `no_spread` has already
    refused every difference with no spread to test: the warning says nothing the report does not."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Precision loss occurred", category=RuntimeWarning)
        yield


def _tested(mean: float, test: Any, method: str, level: float, df: float) -> Difference:
    """A Difference from a SciPy t-test's result: its `level` interval and two-sided p-value."""
    interval = test.confidence_interval(level)
    return Difference(mean, float(interval.low), float(interval.high), method, df=df, p=float(test.pvalue))


@dataclass
class Estimate:
    """The mean of one quantity over seeds with its `level` Student-t interval (None, with
    `flag` saying why, for fewer than 2 seeds or zero spread)."""

    mean: float
    low: float | None
    high: float | None
    n: int
    flag: str = ""

    def __str__(self) -> str:
        if self.low is None:
            return f"{self.mean:.4f} ({self.flag}: no interval, n={self.n})"
        return f"{self.mean:.4f} [{self.low:.4f}, {self.high:.4f}] (n={self.n})"


def estimate(values: Sequence[float], level: float = 0.95) -> Estimate | None:
    """Mean of `values` (one per seed) with a one-sample t interval; None without values."""
    if not values:
        return None
    mean, sd = mean_std(values)
    if len(values) < 2:
        return Estimate(mean, None, None, len(values), FEW_SEEDS)
    if no_spread(sd, values):
        return Estimate(mean, None, None, len(values), ZERO_SPREAD)
    from scipy import stats

    with _agreeing_seeds_allowed():
        interval = stats.ttest_1samp(values, 0.0).confidence_interval(level)
    return Estimate(mean, float(interval.low), float(interval.high), len(values))
