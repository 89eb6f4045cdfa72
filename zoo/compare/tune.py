"""Arms compared at their own best value of one key (`zoo-compare SWEEP tune=optim.lr`).

An architecture change often moves the best learning rate, so arms compared at one shared rate
can show the rate's effect as the architecture's. With `tune=KEY` an arm is every run with the
same config except the seed and KEY; each arm is reported at the KEY value with the best mean
final metric over its seeds, with the whole curve of the metric against KEY, and its difference
to the baseline arm with a 95% interval. The difference is measured without the winner's curse:
each seed of each arm counts at the value chosen on that arm's *other* seeds
(`zoo.compare.select.leave_one_seed_out`); with one seed the choice and the measurement share
it, which is said. An arm whose best value is the lowest or highest one tried gets a warning:
its best may lie outside the grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from zoo.compare.errors import CompareError
from zoo.compare.escape import code, text
from zoo.compare.plots import plot_tuning
from zoo.compare.report import (_show, accounting_line, design_line, few_seed_warnings, load_runs, make_out,
                                 pick_baseline, repeat_warnings, status_of, write_csv)
from zoo.compare.runs import IGNORED, Run
from zoo.compare.select import Choice, leave_one_seed_out
from zoo.compare.stats import Difference, difference, holm, mean_std
from zoo.config.records.atomic import write_text

# the last part of a metric's name -> whether a lower value is better
DIRECTION = {"loss": True, "ppl": True, "bpb": True, "accuracy": False, "bleu": False, "exact_match": False}


def lower_is_better(metric: str) -> bool:
    name = metric.rsplit("/", 1)[-1]
    if name not in DIRECTION:
        raise CompareError(f"metric={metric}: tune= picks each arm's best value, and which way is better is "
                           f"known for {', '.join(sorted(DIRECTION))} only")
    return DIRECTION[name]


@dataclass
class Point:
    """One value of the tuned key within an arm: its runs and the final metric over their seeds."""

    value: Any
    runs: list[Run]
    mean: Optional[float] = None
    std: Optional[float] = None
    seeds: int = 0

    def finals(self, metric: str) -> dict:
        return {r.seed: r.final(metric) for r in self.runs if r.final(metric) is not None}


@dataclass
class TunedArm:
    name: str  # "arm N"
    runs: list[Run]
    points: list[Point]  # in increasing order of the tuned value
    settings: dict[str, str] = field(default_factory=dict)  # differing keys, the tuned one left out
    best: Optional[Point] = None
    diff: Optional[Difference] = None
    warning: str = ""
    choice: Optional[Choice] = None  # each seed's held-out value and where it was measured

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

    @property
    def warnings(self) -> list[str]:
        out = [arm.warning for arm in self.arms if arm.warning]
        shared = [arm.name for arm in self.arms if arm.choice is not None and not arm.choice.held_out and arm.best]
        if shared:
            out.append(f"{', '.join(shared)}: one seed per {self.key} value, so the best value was chosen and "
                       f"measured on the same seed (winner's curse: the difference is optimistic); run 2 or more "
                       f"seeds to measure each seed at a value chosen on the others")
        return (out + repeat_warnings([r for a in self.arms for r in a.runs])
                + few_seed_warnings([(arm.name, arm.diff) for arm in self.arms]))

    def rows(self) -> list[dict]:
        out = []
        for arm in self.arms:
            row = {"arm": arm.name + (" (baseline)" if arm is self.baseline else "")}
            row.update({k: arm.settings.get(k, "") for k in self.keys})
            best = arm.best
            row.update({
                f"best {self.key}": best.value if best else None,
                f"{self.metric} mean": best.mean if best else None, f"{self.metric} std": best.std if best else None,
                "seeds": best.seeds if best else 0,
                "held_out mean": (sum(arm.held_out().values()) / len(arm.held_out())) if arm.held_out() else None,
                "diff": arm.diff.mean if arm.diff else None,
                "ci_low": arm.diff.low if arm.diff else None, "ci_high": arm.diff.high if arm.diff else None,
                "df": arm.diff.df if arm.diff else None, "p": arm.diff.p if arm.diff else None,
                "p_holm": arm.diff.p_holm if arm.diff else None,
                "curve": "; ".join(f"{p.value}: {'' if p.mean is None else f'{p.mean:.4f}'}" for p in arm.points),
                "warning": arm.warning,
            })
            out.append(row)
        return out


def _order(value: Any) -> tuple:
    return (0, float(value), "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0.0, str(value))


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
        points = sorted(by_value.values(), key=lambda p: _order(p.value))
        for p in points:
            finals = list(p.finals(metric).values())
            p.seeds = len(finals)
            if finals:
                p.mean, p.std = mean_std(finals)
        arm = TunedArm(name=f"arm {i}", runs=group, points=points)
        finite = [{s: v for s, v in p.finals(metric).items() if math.isfinite(v)} for p in points]
        arm.choice = leave_one_seed_out(finite, lower)
        if arm.choice.best is not None:
            arm.best = points[arm.choice.best]
            if len(points) == 1:
                arm.warning = f"{arm.name}: only {key}={points[0].value} was tried; nothing was tuned"
            elif arm.best is points[0] or arm.best is points[-1]:
                edge = "lowest" if arm.best is points[0] else "highest"
                arm.warning = (f"{arm.name}: its best {key}={arm.best.value} is the {edge} value tried; "
                               f"the best may lie beyond the grid")
        arms.append(arm)
    all_keys: list[str] = []
    for run in runs:
        all_keys += [k for k in run.config if k not in all_keys]
    keys = [k for k in all_keys if k != key and not k.startswith(IGNORED)
            and len({repr(arm.runs[0].config.get(k)) for arm in arms}) > 1]
    for arm in arms:
        arm.settings = {k: _show(arm.runs[0].config.get(k)) for k in keys}
    return arms, keys


def compare_tuned(dirs: list[Path], out: Path, *, key: str, metric: str = "val/loss",
                  baseline: Optional[str] = None, plots: bool = True) -> TunedReport:
    """Read the sweeps in `dirs`, compare each arm at its own best value of `key`, write
    report.md, report.csv (and tuning.png) into `out`, and return the report."""
    runs, unreadable = load_runs(dirs, metric)
    arms, keys = tune_arms(runs, key, metric)
    base = pick_baseline(arms, baseline)
    for arm in arms:
        if arm is not base and arm.held_out() and base.held_out():
            arm.diff = difference(arm.held_out(), base.held_out())
    holm([arm.diff for arm in arms])
    report = TunedReport(metric=metric, key=key, arms=arms, baseline=base, keys=keys, unreadable=unreadable)
    make_out(out)
    report.files["csv"] = write_csv(report, out / "report.csv")
    if plots:
        report.files["tuning"] = plot_tuning(report, out / "tuning.png")
    report.files["md"] = write_tuned_markdown(report, out / "report.md", dirs)
    return report


def write_tuned_markdown(report: TunedReport, path: Path, dirs) -> Path:
    m, k = text(report.metric), text(report.key)  # copied from runs and the command line, like the keys
    better = "lowest" if lower_is_better(report.metric) else "highest"
    head = ["arm", *map(text, report.keys), f"best {k}", f"{m} at it (mean ± std)", f"{m} held out", "Δ vs baseline [95% CI]",
            "p (Holm)", f"{m} by {k}", "runs"]
    lines = [f"# Sweep comparison at each arm's own {k}: {m}", "",
             f"Runs from {', '.join(code(d) for d in dirs)}. An arm is a config without its seed and "
             f"without {k}; each arm is shown at the {k} with the {better} mean final {m} over its seeds "
             f"(marked * in the curve). To measure without the winner's curse, each seed counts at the {k} "
             f"chosen on the arm's other seeds (leave one seed out: \"held out\", mean over seeds); Δ = arm − "
             f"baseline on those held-out values, with a 95% Student-t interval (paired over seeds when both ran "
             f"the same seeds, Welch otherwise) and the p-value of no difference (Holm-adjusted in brackets when "
             f"several arms face the baseline).", "", design_line([r for a in report.arms for r in a.runs]), "",
             accounting_line([r for a in report.arms for r in a.runs]), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in report.arms:
        best = arm.best
        value = ("no finished run" if not best else f"{best.mean:.4f} (n=1, no spread)" if best.seeds == 1
                 else f"{best.mean:.4f} ± {best.std:.4f} (n={best.seeds})")
        diff = "baseline" if arm is report.baseline else (str(arm.diff) if arm.diff else "–")
        curve = ", ".join(f"{text(p.value)}: {'–' if p.mean is None else f'{p.mean:.4f}'}{'*' if p is best else ''}"
                          for p in arm.points)
        status = status_of(arm.runs)
        held = arm.held_out()
        held_text = (f"{sum(held.values()) / len(held):.4f} (n={len(held)})" if held else "–")
        p_text = "" if arm is report.baseline else (arm.diff.p_text() if arm.diff else "–")
        cells = [arm.name + (" (baseline)" if arm is report.baseline else ""),
                 *[code(arm.settings[x]) for x in report.keys], code(best.value) if best else "–", value,
                 held_text, diff, p_text, curve, status]
        lines.append("| " + " | ".join(cells) + " |")
    if report.warnings:
        lines += ["", "## Warnings", "", *[f"- {text(w)}" for w in report.warnings]]
    if "tuning" in report.files:
        lines += ["", f"![final {m} against {k}, one line per arm]({report.files['tuning'].name})"]
    write_text(path, "\n".join(lines) + "\n")
    return path
