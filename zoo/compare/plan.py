"""`zoo-compare plan=PILOT delta=D [margin=M]`: the seeds per arm to run for a target difference
(and an equivalence margin), from the seed spread of a pilot sweep (`zoo.compare.power`).

The pilot is a sweep's run directories, or a report directory holding runs.csv (read as
`zoo-compare recompute=` reads it). Its arms are grouped as a plain report groups them (a config
without its seed); the spread is the pooled within-arm standard deviation of the final metric,
and where every arm ran the baseline's seeds, that of the paired differences (the test a report
then uses). The spread itself is an estimate: its 95% interval (σ · √(df / χ²), the chi-square
interval of a normal sample's variance) gives the range of seeds the answer could need."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from zoo.compare.errors import CompareError
from zoo.compare.power import ALPHA, MOST_SEEDS, POWER, detectable, paired_differences, pooled_sd, seeds_for
from zoo.compare.power import seeds_for_equivalence as equivalent_seeds
from zoo.compare.report import group_arms, load_runs, pick_baseline
from zoo.compare.runs import Run
from zoo.compare.table import RUNS, SPEC, read_runs


def pilot_runs(directory: Path, metric: str) -> list[Run]:
    """The pilot's runs: from a report's runs.csv when `directory` holds one, else its run directories."""
    if os.path.lexists(directory / RUNS) and os.path.lexists(directory / SPEC):
        _, runs, _ = read_runs(directory)
        return runs
    return load_runs([directory], metric)[0]


def _n(n: int | None) -> str:
    return str(n) if n is not None else f"more than {MOST_SEEDS:,}"


def _seeds(n: int | None) -> str:
    return f"{_n(n)} seeds per arm"


def spread_interval(sd: float, df: int, level: float = 0.95) -> tuple[float, float]:
    """The `level` interval of a standard deviation estimated on `df` degrees of freedom."""
    from scipy import stats

    tail = (1 - level) / 2
    return sd * math.sqrt(df / stats.chi2.ppf(1 - tail, df)), sd * math.sqrt(df / stats.chi2.ppf(tail, df))


def plan(
    directory: Path,
    *,
    delta: float | None,
    margin: float | None = None,
    metric: str = "val/loss",
    baseline: str | None = None,
) -> list[str]:
    """The lines `zoo-compare plan=` prints (the module docstring); CompareError (one line) for a
    target that is not a positive number or a pilot without a spread."""
    for name, value in (("delta", delta), ("margin", margin)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise CompareError(f"{name}={value}: give a positive difference in {metric}'s units, e.g. {name}=0.02")
    if delta is None and margin is None:
        raise CompareError(
            f"plan={directory}: give the difference to detect, delta=VALUE (and/or an equivalence margin, margin=VALUE)"
        )
    runs = [r for r in pilot_runs(directory, metric) if r.final(metric) is not None]
    if not runs:
        raise CompareError(f"plan={directory}: no finished run with {metric}: the pilot gives no spread")
    arms, _ = group_arms(runs)
    values: list[dict[Any, float]] = [arm.finals(metric) for arm in arms]
    pooled = pooled_sd([list(v.values()) for v in values])
    if pooled is None or pooled[0] == 0:
        raise CompareError(
            f"plan={directory}: no arm has 2 seeds with a spread in {metric}: the pilot gives no spread "
            f"(run 2 or more seeds, e.g. seed=0,1,2)"
        )
    sd, df = pooled
    base = pick_baseline(arms, baseline)
    others = [v for a, v in zip(arms, values) if a is not base]
    pairs = paired_differences(others, values[arms.index(base)])
    spread = pooled_sd(pairs) if others and len(pairs) == len(others) else None
    paired = spread is not None and spread[0] > 0
    test_sd, test_df = spread if spread is not None and paired else (sd, df)
    counts = sorted({len(v) for v in values})
    each = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    lines = [
        f"Pilot: {directory}: {len(arms)} arm(s), {each} seeds each ({len(runs)} finished runs), {metric}.",
        f"Spread: pooled within-arm σ = {sd:.4g} ({df} df)"
        + (
            f"; the arms ran the baseline's seeds, so the report's test is paired: σ of the paired "
            f"differences {test_sd:.4g} ({test_df} df)."
            if paired
            else "; the report's test compares two arms' seeds (Welch's t, Student's at equal seeds and spreads)."
        ),
        f"With the pilot's {counts[0]} seeds per arm the smallest difference detected with {POWER:.0%} probability "
        f"at α = {ALPHA} (two-sided) is {detectable(test_sd, max(counts[0], 2), paired):.4g}.",
    ]
    low, high = spread_interval(test_sd, test_df)
    if delta is not None:
        need = seeds_for(delta, test_sd, paired)
        lines.append(
            f"To detect a true difference of {delta:g} with {POWER:.0%} probability at α = {ALPHA} (two-sided, one "
            f"comparison): {_seeds(need)}; over the spread's 95% interval [{low:.4g}, {high:.4g}]: from "
            f"{_n(seeds_for(delta, low, paired))} to {_seeds(seeds_for(delta, high, paired))}."
        )
    if margin is not None:
        need = equivalent_seeds(margin, test_sd, paired)
        lines.append(
            f"To show equivalence within ±{margin:g} (two one-sided tests at α = {ALPHA}, true difference 0, "
            f"{POWER:.0%} probability): {_seeds(need)}; over the spread's 95% interval: from "
            f"{_n(equivalent_seeds(margin, low, paired))} to {_seeds(equivalent_seeds(margin, high, paired))}."
        )
    lines.append(
        "α is per comparison: a report that adjusts a family of comparisons (Holm, Bonferroni) needs more seeds."
    )
    return lines
