"""A one-sided threshold test: does an arm's mean reach a target value of the metric
(`zoo-compare ... threshold=T`)?

This is the NanoGPT speedrun's record rule (modded-nanogpt: a record must show a mean
validation loss below the target 3.28 at p < 0.01 over its runs): per arm, a one-sample
Student-t test of its seeds' final values against T, one-sided in the metric's better direction
(H0: mean ≥ T for a loss, mean ≤ T for an accuracy; `scipy.stats.ttest_1samp` with
`alternative="less"` or `"greater"`), at α = 0.01. With several arms the p-values are
Holm-adjusted over the arms tested (Holm 1979), so the chance that any arm is said to reach a
target it does not reach stays at 1%; the verdict reads the adjusted p-value. An arm on fewer
than 2 seeds, or whose seeds do not vary, has no test and is said so."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.compare.errors import CompareError
from zoo.compare.escape import text
from zoo.compare.stats import Difference, holm, mean_std, no_spread

ALPHA = 0.01  # the speedrun's rule


@dataclass
class Reach:
    """One arm's test of its mean against the target."""

    name: str
    n: int
    mean: float | None
    p: float | None = None
    p_holm: float | None = None
    why: str = ""  # why there is no test

    @property
    def p_used(self) -> float | None:
        """The p-value the verdict reads: Holm's when several arms were tested."""
        return self.p_holm if self.p_holm is not None else self.p

    @property
    def reaches(self) -> bool:
        return self.p_used is not None and self.p_used < ALPHA


def parse_target(value: str | float | None, lower_better: bool | None, metric: str) -> float | None:
    """threshold=T: a finite number; the metric's better direction must be known."""
    if value is None or value == "":
        return None
    try:
        target = float(value)
    except (TypeError, ValueError):
        raise CompareError(f"threshold={value}: give the target as a number in the metric's units, e.g. 3.28") from None
    if not math.isfinite(target):
        raise CompareError(f"threshold={value}: the target must be a finite number")
    if lower_better is None:
        raise CompareError(
            f"threshold={value}: which way is better for metric={metric} is not known, so reaching a target has no side"
        )
    return target


def reach(arms: list[tuple[str, list[float]]], target: float, lower_better: bool) -> list[Reach]:
    """Each (name, final values over seeds) tested against `target`, Holm over those tested."""
    from scipy import stats

    out = []
    for name, values in arms:
        if not values:
            continue
        mean = mean_std(values)[0]
        row = Reach(name, len(values), mean)
        if len(values) < 2:
            row.why = "fewer than 2 seeds"
        elif no_spread(mean_std(values)[1], values):
            row.why = "zero spread"
        else:
            test = stats.ttest_1samp(values, target, alternative="less" if lower_better else "greater")
            row.p = float(test.pvalue)
        out.append(row)
    tested = [r for r in out if r.p is not None]
    diffs = [Difference(0.0, None, None, "one-sided", p=r.p) for r in tested]
    holm(diffs)
    for row, diff in zip(tested, diffs):
        row.p_holm = diff.p_holm
    return out


def sentence(rows: list[Reach], target: float, metric: str, lower_better: bool, on: str = "") -> str:
    """The verdict's sentence on the threshold: which arms reach it at p < 0.01 (`on`: what the
    values are, where not the final values, e.g. "; on the held-out ...")."""
    if not rows:
        return ""
    side = "below" if lower_better else "above"
    adjusted = any(r.p_holm is not None for r in rows)
    reached = [r.name for r in rows if r.reaches]
    rule = (
        f"Threshold {metric} {side} {target:g} (one-sided t-test of each arm's mean, p < {ALPHA:g}"
        + (", Holm over the arms tested" if adjusted else "")
        + on
        + "): "
    )
    if not reached:
        return rule + "no arm shows its mean " + side + f" {target:g} at that level."
    return rule + ", ".join(reached) + (" shows its" if len(reached) == 1 else " show their") + f" mean {side} it."


def lines(rows: list[Reach], target: float, metric: str, lower_better: bool, note: str = "") -> list[str]:
    """The report's "Threshold" table: each arm's mean, seeds and one-sided p-value (`note`: a
    sentence after its description, saying what the values are where not the final values)."""
    if not rows:
        return []
    side = "<" if lower_better else ">"
    out = [
        "",
        f"## Threshold: mean {text(metric)} {side} {target:g}",
        "",
        f"Each arm's final {text(metric)} over its seeds tested against {target:g}, one-sided (H0: the mean is not "
        f"{'below' if lower_better else 'above'} it), at p < {ALPHA:g} (the NanoGPT speedrun's record rule); "
        f"Holm-adjusted over the arms tested in brackets." + (f" {note}" if note else ""),
        "",
        "| arm | mean | seeds | p (Holm) | reaches |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if r.p is None:
            p_text = f"– ({r.why}: no test)"
        else:
            p_text = _p(r.p) + (f" ({_p(r.p_holm)})" if r.p_holm is not None else "")
        mean = "–" if r.mean is None else f"{r.mean:.4f}"
        out.append(f"| {text(r.name)} | {mean} | {r.n} | {p_text} | {'yes' if r.reaches else 'no'} |")
    return out


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def columns(row: Reach | None) -> dict:
    """report.csv's threshold columns for one arm."""
    if row is None:
        return {"threshold_p": None, "threshold_p_holm": None, "reaches": ""}
    return {"threshold_p": row.p, "threshold_p_holm": row.p_holm, "reaches": "yes" if row.reaches else "no"}
