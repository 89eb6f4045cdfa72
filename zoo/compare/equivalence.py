"""Equivalence as a verdict: two one-sided tests of each difference in a report's family against
a margin ±M in the metric's units (`zoo-compare ... equivalence=M`).

Without a margin an interval that spans zero says only that the data cannot tell two arms
apart; it never says they are the same. Schuirmann's two one-sided tests (TOST, Schuirmann
1987; Lakens 2017) test "the difference is at most −M" and "at least +M", each at α = 0.05 one-
sided; rejecting both says the difference lies within ±M, which is the same as its 1 − 2α (90%)
interval lying inside (−M, +M). A report compares m differences at once (its family,
`zoo.compare.verdict.Family`), and holds them together as its other intervals do, by
Bonferroni: each one-sided test at α/m, the equivalence interval at 1 − 2α/m, the TOST p-value
multiplied by m (capped at 1). The p-values come from the difference's own t distribution
(paired or Welch, `zoo.compare.stats.difference`): its standard error and degrees of freedom are
read back from its 95% interval.

Each comparison then reads one of three ways: "equivalent within ±M" (the adjusted TOST p-value
below α: the equivalence interval inside the margin), "different" (the report's adjusted 95%
interval excludes zero, and it is not equivalent), or "cannot tell" (neither: the data fit a
difference inside the margin and one outside it). A difference can be both non-zero and smaller
than the margin; it is then equivalent, and the sentence says that its interval also excludes
zero. A difference with no interval (zero spread, fewer than 2 seeds) is "cannot tell"."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.compare.errors import CompareError
from zoo.compare.escape import text
from zoo.compare.stats import Difference, t_quantile

ALPHA = 0.05  # each one-sided test, before the family's adjustment
EQUIVALENT = "equivalent"
DIFFERENT = "different"
CANNOT_TELL = "cannot tell"


@dataclass
class Equivalence:
    """The two one-sided tests of one difference against ±`margin`, within a family of `m`."""

    margin: float
    m: int
    p_lower: float | None = None  # H0: difference <= −margin
    p_upper: float | None = None  # H0: difference >= +margin
    low: float | None = None  # the 1 − 2α/m interval
    high: float | None = None
    reading: str = CANNOT_TELL
    nonzero: bool = False  # the report's adjusted 95% interval excludes zero

    @property
    def p(self) -> float | None:
        """The TOST p-value: the larger of the two one-sided ones."""
        return None if self.p_lower is None or self.p_upper is None else max(self.p_lower, self.p_upper)

    @property
    def p_adjusted(self) -> float | None:
        """`p` times the family's m (Bonferroni, as the report's adjusted intervals), at most 1."""
        return None if self.p is None else min(1.0, self.m * self.p)

    @property
    def level(self) -> float:
        """The equivalence interval's coverage: 1 − 2α/m (90% for a family of one)."""
        return 1 - 2 * ALPHA / max(self.m, 1)

    def words(self) -> str:
        """ "equivalent within ±0.02", "different" or "cannot tell", as the verdict says it."""
        if self.reading == EQUIVALENT:
            text = f"equivalent within ±{self.margin:g}"
            return text + (" (its difference, though smaller than the margin, is not zero)" if self.nonzero else "")
        return self.reading


def parse_margin(value: str | float | None) -> float | None:
    """equivalence=M: a positive, finite number in the metric's units (None: no margin)."""
    if value is None or value == "":
        return None
    try:
        margin = float(value)
    except (TypeError, ValueError):
        raise CompareError(
            f"equivalence={value}: give the margin as a number in the metric's units, e.g. equivalence=0.02"
        ) from None
    if not math.isfinite(margin) or margin <= 0:
        raise CompareError(f"equivalence={value}: the margin must be a positive number (a difference within ±M)")
    return margin


def tost(diff: Difference | None, margin: float, m: int) -> Equivalence:
    """The two one-sided tests of `diff` (arm − other) against ±`margin`, the family holding `m`
    tested comparisons; "cannot tell" without an interval."""
    out = Equivalence(margin=margin, m=max(m, 1))
    if diff is None or diff.low is None or diff.high is None or diff.df is None:
        return out
    from scipy import stats

    se = (diff.high - diff.low) / 2 / t_quantile(0.975, diff.df)
    out.p_lower = float(stats.t.sf((diff.mean + margin) / se, diff.df))
    out.p_upper = float(stats.t.cdf((diff.mean - margin) / se, diff.df))
    half = t_quantile(1 - ALPHA / out.m, diff.df) * se
    out.low, out.high = diff.mean - half, diff.mean + half
    out.nonzero = diff.adj_low is not None and diff.adj_high is not None and (diff.adj_low > 0 or diff.adj_high < 0)
    p = out.p_adjusted
    if p is not None and p < ALPHA:
        out.reading = EQUIVALENT
    elif out.nonzero:
        out.reading = DIFFERENT
    return out


def sentence(readings: list[tuple[str, Equivalence]], unit: str, on: str = "") -> str:
    """The verdict's sentence on equivalence: each comparison's reading, and how it was tested
    (`on`: what the differences are, where not the final values, e.g. "; on the held-out ...")."""
    if not readings:
        return ""
    margin, m = readings[0][1].margin, readings[0][1].m
    said = "; ".join(f"{name}: {eq.words()}" for name, eq in readings)
    level = 100 * readings[0][1].level
    return (
        f"Against the margin ±{margin:g}{(' ' + unit) if unit else ''} (two one-sided tests, each at "
        f"{100 * ALPHA / m:.3g}%, i.e. the {level:.3g}% interval inside the margin"
        f"{'' if m == 1 else f', Bonferroni over the family of {m}'}{on}): {said}."
    )


def lines(readings: list[tuple[str, Equivalence]], metric: str, note: str = "") -> list[str]:
    """The report's "Equivalence" table: one row per comparison of the family (`note`: a sentence
    after its description, saying what the differences are where not the final values)."""
    if not readings:
        return []
    eq0 = readings[0][1]
    out = [
        "",
        f"## Equivalence within ±{eq0.margin:g}",
        "",
        f"Two one-sided tests (TOST) of each difference on {text(metric)} against ±{eq0.margin:g}: "
        f"p (lower) tests Δ ≤ −{eq0.margin:g}, p (upper) Δ ≥ +{eq0.margin:g}; the TOST p-value is the "
        f"larger, multiplied by the family's {eq0.m} (Bonferroni, as the adjusted intervals above); the "
        f"interval is at {100 * eq0.level:.3g}%. Equivalent: that p below {ALPHA:g} (the interval inside the "
        f"margin); different: not equivalent and the adjusted 95% interval excludes zero; cannot tell: neither."
        + (f" {note}" if note else ""),
        "",
        "| comparison | equivalence interval | p (lower) | p (upper) | TOST p (adjusted) | reading |",
        "|---|---|---|---|---|---|",
    ]
    for name, eq in readings:
        interval = "–" if eq.low is None else f"[{eq.low:+.4f}, {eq.high:+.4f}]"
        out.append(
            f"| {text(name)} | {interval} | {_p(eq.p_lower)} | {_p(eq.p_upper)} | {_p(eq.p_adjusted)} | {eq.words()} |"
        )
    return out


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def columns(eq: Equivalence | None) -> dict:
    """report.csv's (and pairs.csv's) equivalence columns for one comparison."""
    if eq is None:
        return {"equiv_low": None, "equiv_high": None, "tost_p": None, "tost_p_adj": None, "equivalence": ""}
    return {
        "equiv_low": eq.low,
        "equiv_high": eq.high,
        "tost_p": eq.p,
        "tost_p_adj": eq.p_adjusted,
        "equivalence": eq.reading,
    }
