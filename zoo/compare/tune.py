"""Arms compared at their own best value of one key (`zoo-compare SWEEP tune=optim.lr`).

An architecture change often moves the best learning rate, so arms compared at one shared rate
can show the rate's effect as the architecture's. With `tune=KEY` an arm is every run with the
same config except the seed and KEY; each arm is reported at the KEY value with the best mean
final metric over its seeds, with the whole curve of the metric against KEY, and its difference
to the baseline arm with a 95% interval. The difference is measured without the winner's curse:
each seed of each arm counts at the value chosen on that arm's *other* seeds
(`zoo.compare.select.leave_one_seed_out`); with one seed the choice and the measurement share
it, which is said. An arm whose best value is the lowest or highest one tried gets a warning:
its best may lie outside the grid.

Failures count: a value at which any run ended without a final result (failed, diverged,
unfinished or damaged) is failed for tuning (`zoo.compare.select`): never chosen, never averaged
over the seeds that survived it; the report lists those runs and values.

Each arm's sensitivity to the key (Wortsman et al. 2023, "Small-scale proxies for large-scale
Transformer training instabilities", for the learning rate): per seed, the mean over the values
tried of min(L(v), L0) − L*, with L* the seed's best final loss over the values and L0 = ln V the
loss of a uniform prediction over the vocabulary (the loss at initialisation, which runs do not
record); a run that failed counts as L0. Its mean over seeds has a 95% Student-t interval. It is
reported for a loss metric only (L0 is a loss).

equivalence=, threshold= and last_k= read the held-out values (`zoo.compare.report.beyond_seeds`):
each held-out difference against the margin, each arm's held-out values against the target, the
last-k spread of the runs those values come from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.compare.design import (
    few_seed_warnings,
    flag_warnings,
    held_settings,
    repeat_warnings,
)
from zoo.compare.equivalence import Equivalence
from zoo.compare.errors import CompareError
from zoo.compare.joint import edge_clause, is_joint, joined, order
from zoo.compare.markdown.tuned import write_tuned_markdown
from zoo.compare.noise import LAST_K, ArmNoise, Attribution
from zoo.compare.patterns import arm_setting
from zoo.compare.plots import plot_tuning
from zoo.compare.report import beyond_seeds, declare, load_runs, make_out, option_columns, pick_baseline, write_csv
from zoo.compare.routing_plot import plot_routing
from zoo.compare.runs import IGNORED, NOT_SETTINGS, Run, RunStatus
from zoo.compare.select import Choice, chosen_runs, leave_one_seed_out
from zoo.compare.stats import Difference, Estimate, difference, estimate, mean_std
from zoo.compare.table import run_place, swept, vocab_size, write_heldout, write_pair_rows, write_runs
from zoo.compare.threshold import Reach
from zoo.compare.verdict import Family, Pair, lower_is_better


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


@dataclass
class Point:
    """One value of the tuned key within an arm: its runs and the final metric over their seeds."""

    value: Any
    runs: list[Run]
    mean: float | None = None
    std: float | None = None
    seeds: int = 0

    def finals(self, metric: str) -> dict:
        return {r.seed: r.final(metric) for r in self.runs if r.final(metric) is not None}

    def without_result(self, metric: str) -> list[Run]:
        """Its runs that ended without a finite final metric: they make the value failed for tuning."""
        return [r for r in self.runs if not _finite(r.final(metric))]


@dataclass
class TunedArm:
    name: str  # "arm N"
    runs: list[Run]
    points: list[Point]  # in increasing order of the tuned value
    settings: dict[str, str] = field(default_factory=dict)  # differing keys, the tuned one left out
    best: Point | None = None
    diff: Difference | None = None
    warning: str = ""
    choice: Choice | None = None  # each seed's held-out value and where it was measured
    sensitivity: Estimate | None = None  # Wortsman et al. 2023, mean over seeds with its interval
    sensitivities: dict[Any, float] = field(default_factory=dict)  # seed -> its sensitivity
    no_sensitivity: str = ""  # why there is none

    def held_out(self) -> dict:
        """{seed: final metric at the value chosen on the other seeds}."""
        return self.choice.finals if self.choice else {}


@dataclass
class TunedReport:
    metric: str
    key: str
    arms: list[TunedArm]
    baseline: TunedArm
    keys: list[str]
    files: dict[str, Path] = field(default_factory=dict)
    unreadable: list[Run] = field(default_factory=list)
    family: Family | None = None  # the comparisons adjusted together (zoo.compare.verdict)
    pairs: list[Pair] | None = None  # pairs=all: every pair of arms, on held-out values
    # equivalence=, threshold= and the noise beyond seeds, on the held-out values (zoo.compare.report.beyond_seeds)
    margin: float | None = None
    equivalent: list[tuple[str, Equivalence]] = field(default_factory=list)
    target: float | None = None
    reach: list[Reach] = field(default_factory=list)
    last_k: int = LAST_K
    noise: list[ArmNoise] = field(default_factory=list)
    parts: list[Attribution | str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        out = [arm.warning for arm in self.arms if arm.warning]
        shared = [arm.name for arm in self.arms if arm.choice is not None and not arm.choice.held_out and arm.best]
        if shared:
            out.append(
                f"{', '.join(shared)}: one seed per {self.key} value, so the best value was chosen and "
                f"measured on the same seed (winner's curse: the difference is optimistic); run 2 or more "
                f"seeds to measure each seed at a value chosen on the others"
            )
        return (
            out
            + repeat_warnings([r for a in self.arms for r in a.runs])
            + few_seed_warnings([(arm.name, arm.diff) for arm in self.arms])
        )

    @property
    def notes(self) -> list[str]:
        """What the report's text says under Warnings beside `warnings` (which zoo-compare also
        prints): the values failed for tuning, seeds not measured, and rows without an interval."""
        out = []
        for arm in self.arms:
            if arm.choice is None:
                continue
            for i in arm.choice.failed:
                point = arm.points[i]
                out.append(
                    f"{arm.name}: {self.key}={point.value} is failed for tuning: {len(point.without_result(self.metric))} "
                    f"of its {len(point.runs)} run(s) ended without a final {self.metric}; it is never chosen "
                    f"and never averaged over the seeds that finished"
                )
            if arm.choice.best is None and arm.choice.failed:
                out.append(
                    f"{arm.name}: every {self.key} tried has a run without a final result: the arm has no tuned value"
                )
            if arm.choice.unmeasured:
                out.append(
                    f"{arm.name}: seed(s) {', '.join(map(str, arm.choice.unmeasured))} have no run at the "
                    f"{self.key} the other seeds chose: not measured"
                )
            if arm.sensitivity is not None and arm.sensitivity.flag:
                out.append(f"{arm.name}: its sensitivity to {self.key} has {arm.sensitivity.flag}: no interval")
        return out + flag_warnings([(arm.name, arm.diff) for arm in self.arms])

    def rows(self) -> list[dict]:
        out = []
        for arm in self.arms:
            row: dict[str, Any] = {"arm": arm.name + (" (baseline)" if arm is self.baseline else "")}
            row.update({k: arm.settings.get(k, "") for k in self.keys})
            best = arm.best
            row.update(
                {
                    f"best {self.key}": best.value if best else None,
                    f"{self.metric} mean": best.mean if best else None,
                    f"{self.metric} std": best.std if best else None,
                    "seeds": best.seeds if best else 0,
                    "held_out mean": (sum(arm.held_out().values()) / len(arm.held_out())) if arm.held_out() else None,
                    "diff": arm.diff.mean if arm.diff else None,
                    "ci_low": arm.diff.low if arm.diff else None,
                    "ci_high": arm.diff.high if arm.diff else None,
                    "df": arm.diff.df if arm.diff else None,
                    "p": arm.diff.p if arm.diff else None,
                    "p_holm": arm.diff.p_holm if arm.diff else None,
                    "adj_low": arm.diff.adj_low if arm.diff else None,
                    "adj_high": arm.diff.adj_high if arm.diff else None,
                    "flag": arm.diff.flag if arm.diff else "",
                    "sensitivity": arm.sensitivity.mean if arm.sensitivity else None,
                    "sensitivity_low": arm.sensitivity.low if arm.sensitivity else None,
                    "sensitivity_high": arm.sensitivity.high if arm.sensitivity else None,
                    "sensitivity_seeds": arm.sensitivity.n if arm.sensitivity else 0,
                    "curve": "; ".join(f"{p.value}: {'' if p.mean is None else f'{p.mean:.4f}'}" for p in arm.points),
                    "warning": arm.warning,
                }
            )
            row.update(option_columns(self, arm))
            out.append(row)
        return out


def _order(value: Any) -> tuple:
    return (
        (0, float(value), "")
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else (1, 0.0, str(value))
    )


def tune_arms(runs: list[Run], key: str, metric: str) -> tuple[list[TunedArm], list[str]]:
    """Arms (config minus seed minus `key`) in order of first appearance, each at its best `key`
    value; and the config keys other than `key` that differ between arms."""
    if key.startswith(IGNORED):
        raise CompareError(f"tune={key}: this key does not change what is learned; tune a training or model key")
    if not any(key in r.config for r in runs):
        raise CompareError(f"tune={key}: no run has this config key (e.g. tune=optim.lr)")
    lower = lower_is_better(metric)
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(tuple(kv for kv in run.arm_key if kv[0] != key), []).append(run)
    arms = []
    for i, group in enumerate(groups.values()):
        by_value: dict[str, Point] = {}
        for run in group:
            value = run.config.get(key)
            by_value.setdefault(repr(value), Point(value=value, runs=[])).runs.append(run)
        points = sorted(by_value.values(), key=lambda p: order(key, p.value) if is_joint(key) else _order(p.value))
        for p in points:
            finals = list(p.finals(metric).values())
            p.seeds = len(finals)
            if finals:
                p.mean, p.std = mean_std(finals)
        arm = TunedArm(name=f"arm {i}", runs=group, points=points)
        finite = [{s: v for s, v in p.finals(metric).items() if math.isfinite(v)} for p in points]
        arm.choice = leave_one_seed_out(finite, lower, failed=[bool(p.without_result(metric)) for p in points])
        arm.sensitivities, arm.no_sensitivity = sensitivities(points, metric)
        arm.sensitivity = estimate(list(arm.sensitivities.values()))
        if arm.choice.best is not None:
            arm.best = points[arm.choice.best]
            if len(points) == 1:
                arm.warning = f"{arm.name}: only {key}={points[0].value} was tried; nothing was tuned"
            elif clause := edge_clause(key, [p.value for p in points], arm.best.value):
                beyond = "it" if is_joint(key) else "the grid"
                arm.warning = f"{arm.name}: {clause}; the best may lie beyond {beyond}"
        arms.append(arm)
    all_keys: list[str] = []
    for run in runs:
        all_keys += [k for k in run.config if k not in all_keys]
    keys = [
        k
        for k in all_keys
        if k != key and not k.startswith(NOT_SETTINGS) and len({repr(arm.runs[0].config.get(k)) for arm in arms}) > 1
    ]
    for arm in arms:
        arm.settings = {k: arm_setting(arm.runs[0].config, k) for k in keys}
    return arms, keys


def sensitivities(points: list[Point], metric: str) -> tuple[dict[Any, float], str]:
    """{seed: its sensitivity to the key} (Wortsman et al. 2023: the mean over the values tried of
    min(L, L0) − L*, L* the seed's best loss over them, L0 = ln V; a failed run counts as L0),
    for every seed with a finished or failed run at every value; and why there is none."""
    if metric.rsplit("/", 1)[-1] != "loss":
        return {}, f"{metric} is not a loss (L0 = ln V is)"
    if len(points) < 2:
        return {}, "one value tried"
    seeds = list(dict.fromkeys(r.seed for p in points for r in p.runs))
    known = [v for v in (vocab_size(r) for p in points for r in p.runs) if v is not None]  # a failed run has no summary
    out: dict[Any, float] = {}
    for seed in seeds:
        losses: list[float | None] = []
        floors: list[float | None] = []
        for p in points:
            run = next((r for r in p.runs if r.seed == seed), None)
            if run is None or run.status in (RunStatus.unfinished, RunStatus.damaged):
                break
            final = run.final(metric)
            losses.append(final if final is not None and math.isfinite(final) else None)  # None: failed
            floors.append(vocab_size(run))
        else:
            found = [v for v in floors if v is not None] or known
            if not found:
                continue
            l0 = math.log(found[0])
            capped = [l0 if v is None else min(v, l0) for v in losses]
            best = min(capped)
            out[seed] = sum(v - best for v in capped) / len(capped)
    if not out:
        return {}, "no seed has a finished or failed run at every value with a known vocabulary"
    return out, ""


def heldout_rows(arms: list, key: str, metric: str, size_key: str | None = None) -> list[dict]:
    """heldout.csv's rows: per arm (and size), per seed, the value chosen on the other seeds, the
    final metric there and the run measured; with tune= alone also each seed's sensitivity."""
    rows = []
    for arm in arms:
        groups = (
            [(None, arm.points, arm.choice, arm.sensitivities)]
            if size_key is None
            else [(s.value, s.points, s.choice, {}) for s in arm.sizes if s.choice is not None]
        )
        for size, points, choice, sens in groups:
            if choice is None:
                continue
            for seed in dict.fromkeys([*choice.chosen, *sens]):
                row: dict[str, Any] = {"arm": arm.name}
                if size_key is not None:
                    row[size_key] = size
                index = choice.chosen.get(seed)
                run = next((r for r in points[index].runs if r.seed == seed), None) if index is not None else None
                row.update(
                    {
                        "seed": seed,
                        key: points[index].value if index is not None else None,
                        metric: choice.finals.get(seed),
                        "run": "/".join(run_place(run)) if run else "",
                    }
                )
                if size_key is None:
                    row["sensitivity"] = sens.get(seed)
                rows.append(row)
    return rows


def compare_tuned(
    dirs: list[Path],
    out: Path,
    *,
    key: str,
    metric: str = "val/loss",
    baseline: str | None = None,
    plots: bool = True,
    found: tuple[list[Run], list[Run]] | None = None,
    pairs: bool = False,
    equivalence: float | None = None,
    threshold: float | None = None,
    last_k: int = LAST_K,
) -> TunedReport:
    """Read the sweeps in `dirs` (or take `found`: runs and runs left out), compare each arm at its
    own best value of `key`, write report.md, report.csv, runs.csv, heldout.csv (and tuning.png)
    into `out`, and return the report. `pairs`: every pair of arms compared on their held-out
    values (pairs.csv), all pairs one family. `equivalence`, `threshold`, `last_k`: as a plain
    report's (`zoo.compare.report.compare`), read on the held-out values: each comparison's
    held-out difference tested against ±`equivalence`, each arm's held-out values against
    `threshold`, the last-k spread over the runs they come from and the init/data-order split
    over the runs at the arm's best value (one setting)."""
    runs, unreadable = found if found is not None else load_runs(dirs, metric)
    arms, keys = tune_arms(joined(runs, key), key, metric)
    base = pick_baseline(arms, baseline)
    for arm in arms:
        if arm is not base and arm.held_out() and base.held_out():
            arm.diff = difference(arm.held_out(), base.held_out())
    report = TunedReport(metric=metric, key=key, arms=arms, baseline=base, keys=keys, unreadable=unreadable)
    report.family, report.pairs = declare(arms, base, lambda a: a.held_out(), pairs)
    tails = beyond_seeds(
        report,
        equivalence,
        threshold,
        last_k,
        files=found is None,
        values=lambda a: a.held_out(),
        measured=lambda a: chosen_runs(a.choice, a.points),
        crossed=lambda a: a.best.runs if a.best else [],
    )
    make_out(out)
    report.files["csv"] = write_csv(report, out / "report.csv")
    extra = {"equivalence": equivalence, "threshold": threshold, "last_k": last_k if tails else None}
    report.files.update(
        write_runs(
            report,
            out,
            kind="tuned",
            tune=key,
            pairs=pairs,
            held=held_settings(report.arms, key),
            tails=tails,
            extra=extra,
        )
    )
    if report.pairs is not None:
        report.files["pairs_csv"] = write_pair_rows(report.pairs, out)
    report.files["heldout_csv"] = write_heldout(heldout_rows(arms, key, metric), out)
    if plots:
        report.files["tuning"] = plot_tuning(report, out / "tuning.png")
        routing = plot_routing(report, out / "routing.png", tuned=key)  # mixture-of-experts arms only
        if routing is not None:
            report.files["routing"] = routing
    report.files["md"] = write_tuned_markdown(report, out / "report.md", swept(report))
    return report
