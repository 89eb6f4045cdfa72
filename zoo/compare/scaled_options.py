"""equivalence=, threshold= and last_k= of a scaled report (`zoo-compare SWEEP scale=KEY ...`): one
reading per arm and size.

A scaled report compares arms by compute multipliers (`zoo.compare.multipliers`); these options
read the metric itself at each size, on the values that size is measured on (with tune=, each seed
at the value chosen on the size's other seeds: `zoo.compare.select`, so no seed both chooses and
is measured).

- equivalence=M: at each size every arm other than the baseline has its difference to the
  baseline there (paired over seeds when both ran the same seeds, Welch otherwise:
  `zoo.compare.stats.difference`), tested by two one-sided tests against ±M
  (`zoo.compare.equivalence.tost`). The family is every such difference with a test, over all
  sizes: the TOST p-value is multiplied by its m (Bonferroni) and "different" reads Holm's
  adjusted interval over the same family, as in a plain report. It is a family of its own, apart
  from the multipliers': a loss difference at one size and a compute multiplier are different
  questions of the same runs.
- threshold=T: each arm at each size, its values there tested one-sided against T
  (`zoo.compare.threshold.reach`), Holm over every arm and size tested.
- last_k=K: each arm at each size, the spread across its seeds beside its runs' spread over their
  last K validations (`zoo.compare.noise`), and the split between init and data-order seeds at
  each size where they cross (with tune=, over the runs at the size's best value: one setting).

No combination is refused: each reads one size at a time, where a plain report reads its one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zoo.compare import equivalence as equiv
from zoo.compare import noise
from zoo.compare import threshold as thresh
from zoo.compare.errors import CompareError
from zoo.compare.escape import code, text
from zoo.compare.noise import arm_noise, attribute, tail_sd
from zoo.compare.scaled_arms import ScaledArm, Size
from zoo.compare.select import chosen_runs
from zoo.compare.stats import Difference, difference
from zoo.compare.tune import _order
from zoo.compare.verdict import adjust, direction, label, unit


@dataclass
class SizeReading:
    """One arm's difference to the baseline at one size, and its two one-sided tests."""

    size: Any
    arm: str  # the arm's name ("arm 1")
    name: str  # the comparison, named by the arms' changes
    diff: Difference | None
    eq: equiv.Equivalence


def at_sizes(arms: list[ScaledArm], baseline: ScaledArm) -> list[tuple[Any, ScaledArm, Size, Size]]:
    """(size, arm, the arm's size, the baseline's size) for every arm other than the baseline at
    every size both have a result at, in increasing order of size."""
    base = {repr(s.value): s for s in baseline.scored}
    out = [
        (s.value, arm, s, base[repr(s.value)])
        for arm in arms
        if arm is not baseline
        for s in arm.scored
        if repr(s.value) in base
    ]
    return sorted(out, key=lambda row: _order(row[0]))


def measured(report: Any, size: Size) -> list:
    """The runs `size`'s values come from: with tune=, each seed's run at the value chosen on the
    others; else all its runs."""
    return chosen_runs(size.choice, size.points) if report.tune else size.runs


def crossed(report: Any, size: Size) -> list:
    """The runs at one setting whose seeds are split: with tune=, those at the size's best value."""
    if report.tune:
        return size.points[size.choice.best].runs if size.choice and size.choice.best is not None else []
    return size.runs


def read_options(report: Any, margin: float | None, target: float | None, k: int, *, files: bool) -> dict:
    """Set `report`'s (a zoo.compare.scale.ScaleReport) readings at each size; return {run path:
    last-k spread} (`files` False: runs rebuilt from runs.csv, whose spreads are that table's)."""
    metric, key = report.metric, report.key
    report.margin, report.target, report.last_k = margin, target, k
    if margin is not None:
        items = [
            (value, arm, f"{label(arm)} − {label(report.baseline)}", difference(own.seed_values(), base.seed_values()))
            for value, arm, own, base in at_sizes(report.arms, report.baseline)
        ]
        what = f"each arm other than the baseline against it at each size ({len(items)} differences)"
        report.equivalence_family = adjust(what, [(f"{n} at {key}={v}", d) for v, _, n, d in items])
        m = report.equivalence_family.m
        report.equivalent = [SizeReading(v, a.name, n, d, equiv.tost(d, margin, m)) for v, a, n, d in items]
    if target is not None:
        lower = direction(metric)
        if lower is None:
            raise CompareError(f"threshold={target:g}: which way is better for metric={metric} is not known")
        rows = [(f"{arm.name} at {key}={s.value}", s.finals) for arm in report.arms for s in arm.scored]
        report.reach = thresh.reach(rows, target, lower)
    tails = {}
    for run in (r for a in report.arms for r in a.runs):
        value = tail_sd(run, metric, k, files=files)
        if value is not None:
            tails[run.path] = value
    at = [(f"{arm.name} at {key}={s.value}", s) for arm in report.arms for s in arm.sizes]
    report.noise = [arm_noise(name, measured(report, s), metric, tails) for name, s in at]
    report.parts = [p for p in (attribute(name, crossed(report, s), metric) for name, s in at) if p is not None]
    return tails


def columns(report: Any, arm: ScaledArm, size: Size) -> dict[str, Any]:
    """report.csv's equivalence and threshold columns for `arm` at `size`, where given."""
    row: dict[str, Any] = {}
    if report.margin is not None:
        mine = next((r.eq for r in report.equivalent if r.arm == arm.name and repr(r.size) == repr(size.value)), None)
        row.update(equiv.columns(mine))
    if report.target is not None:
        name = f"{arm.name} at {report.key}={size.value}"
        row.update(thresh.columns(next((r for r in report.reach if r.name == name), None)))
    return row


def sentences(report: Any) -> str:
    """What equivalence= and threshold= conclude, after the verdict: each reading at each size."""
    tuned = f", each seed at the {report.tune} chosen on the size's other seeds" if report.tune else ""
    parts = []
    if report.equivalent:
        readings = [(f"{report.key}={r.size}, {r.arm}", r.eq) for r in report.equivalent]
        parts.append(equiv.sentence(readings, unit(report.metric), f"; at each size, against the baseline{tuned}"))
    lower = direction(report.metric)
    if report.target is not None and lower is not None:
        parts.append(thresh.sentence(report.reach, report.target, report.metric, lower, f"; at each size{tuned}"))
    return " ".join(parts)


def lines(report: Any) -> list[str]:
    """The report's sections of equivalence= (a row per size and arm), threshold= and the noise
    beyond seeds, where they apply."""
    k, m = text(report.key), text(report.metric)
    tuned = (
        f" With tune={text(report.tune)} the values at a size are the held-out ones: each seed at the "
        f"{text(report.tune)} chosen on the size's other seeds (leave one seed out); a run's last-k spread "
        f"is that of the runs those values come from, and the split between init and data-order seeds is over "
        f"the runs at the size's best {text(report.tune)} (one setting)."
        if report.tune
        else ""
    )
    out: list[str] = []
    if report.equivalent:
        first = report.equivalent[0].eq
        out += [
            "",
            f"## Equivalence within ±{first.margin:g} at each size",
            "",
            f"At each size, each arm's difference in {m} to the baseline there (Δ = arm − baseline, 95% Student-t "
            f"interval, paired over seeds when both ran the same seeds, Welch otherwise), tested by two one-sided "
            f"tests (TOST): p (lower) tests Δ ≤ −{first.margin:g}, p (upper) Δ ≥ +{first.margin:g}; the TOST "
            f"p-value is the larger, multiplied by the family's {first.m}, every such difference with a test over "
            f"all sizes (Bonferroni; a family apart from the compute multipliers'); the equivalence interval is at "
            f"{100 * first.level:.3g}%. Equivalent: that p below {equiv.ALPHA:g} (the interval inside the margin); "
            f"different: not equivalent and the difference's interval adjusted over the same family (at "
            f"1 − 5%/{first.m}, Bonferroni) excludes zero; cannot tell: neither.{tuned}",
            "",
            f"| {k} | comparison | Δ [95% CI] | equivalence interval | p (lower) | p (upper) | TOST p (adjusted) "
            f"| reading |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in report.equivalent:
            eq = r.eq
            interval = "–" if eq.low is None else f"[{eq.low:+.4f}, {eq.high:+.4f}]"
            diff = "–" if r.diff is None else str(r.diff)
            out.append(
                f"| {code(r.size)} | {text(r.name)} | {diff} | {interval} | {_p(eq.p_lower)} | {_p(eq.p_upper)} | "
                f"{_p(eq.p_adjusted)} | {eq.words()} |"
            )
    lower = direction(report.metric)
    if report.target is not None and lower is not None:
        out += thresh.lines(report.reach, report.target, report.metric, lower, f"One row per arm and size.{tuned}")
    return out + noise.lines(report.noise, report.last_k, report.parts, report.metric, tuned.strip())


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"
