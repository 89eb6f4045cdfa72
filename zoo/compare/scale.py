"""Arms compared across model sizes (`zoo-compare SWEEP... scale=model.d_model`): does a change
keep paying as the model grows, and what is it worth in training compute?

A size is one value of KEY. An arm is every run with the same config except the seed, KEY and
the keys that change with KEY alone (a size that sets width, depth and training steps together
is one size). For each arm and size: the training compute C = 3 · F · D (F the summary's
forward FLOPs per token, D the tokens seen; backward ≈ 2 × forward) and the final metric,
mean ± std over seeds. Each arm gets a power law L = a · C^-b (+ e, the irreducible loss, from
MIN_POINTS_IRREDUCIBLE sizes on) with a 95% bootstrap interval for b (seeds resampled within
each size). The compute multiplier of an arm at a size is C_baseline / C_arm(L_baseline): the
baseline's compute at that size over the compute at which the arm's fitted curve reaches the
baseline's loss there; > 1 means the arm gets there with less compute. Its interval comes from
the same bootstrap. Too few sizes for a fit: said, never faked."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from zoo.compare.plots import plot_scaling
from zoo.compare.powerlaw import MIN_POINTS_IRREDUCIBLE, PowerLaw, TooFewPoints, fit_power_law
from zoo.compare.report import _show, load_runs, make_out, pick_baseline, status_of, write_csv
from zoo.compare.runs import IGNORED, Run
from zoo.compare.stats import mean_std
from zoo.compare.tune import _order

BACKWARD_FACTOR = 3  # training FLOPs per token = forward + backward ≈ 3 × forward
BOOTSTRAP = 1000  # resamples of the seeds
LEVEL = 0.95


def training_compute(run: Run) -> Optional[float]:
    """3 × forward FLOPs/token × tokens seen, from the run's summary; None when it lacks them."""
    model = run.summary.get("model") or {}
    flops, tokens = model.get("flops_per_token"), run.summary.get("tokens_seen")
    if not isinstance(flops, (int, float)) or not isinstance(tokens, (int, float)) or flops <= 0 or tokens <= 0:
        return None
    return float(BACKWARD_FACTOR * flops * tokens)


@dataclass
class Size:
    """One size of one arm: its runs, their training compute and final metric over seeds."""

    value: Any
    runs: list[Run]
    compute: Optional[float] = None  # mean over the finished runs
    mean: Optional[float] = None
    std: Optional[float] = None
    finals: list[float] = field(default_factory=list)


@dataclass
class Multiplier:
    """An arm's compute multiplier against the baseline at one of the baseline's sizes."""

    size: Any
    value: Optional[float]  # None: the arm's curve never reaches the baseline's loss there
    low: Optional[float] = None
    high: Optional[float] = None
    note: str = ""

    def __str__(self) -> str:
        if self.value is None:
            return f"– ({self.note})" if self.note else "–"
        text = f"{self.value:.2f}×"
        if self.low is not None:
            text += f" [{self.low:.2f}, {self.high:.2f}]"
        if self.note:
            text += f" ({self.note})"
        return text


@dataclass
class ScaledArm:
    name: str  # "arm N"
    runs: list[Run]
    sizes: list[Size]  # in increasing order of KEY
    settings: dict[str, str] = field(default_factory=dict)
    fit: Optional[PowerLaw] = None
    exponent_low: Optional[float] = None
    exponent_high: Optional[float] = None
    no_fit: str = ""  # why there is no fit
    multipliers: list[Multiplier] = field(default_factory=list)  # at each baseline size

    @property
    def scored(self) -> list[Size]:
        return [s for s in self.sizes if s.mean is not None and s.compute is not None]


@dataclass
class ScaleReport:
    metric: str
    key: str
    arms: list[ScaledArm]
    baseline: ScaledArm
    keys: list[str]  # settings that differ between arms
    linked: list[str]  # keys that change with KEY (part of a size)
    irreducible: bool
    files: dict[str, Path] = field(default_factory=dict)
    unreadable: list[Run] = field(default_factory=list)

    notes: list[str] = field(default_factory=list)  # what the data left out, said once each

    @property
    def warnings(self) -> list[str]:
        return self.notes + [f"{arm.name}: no power law: {arm.no_fit}" for arm in self.arms if arm.no_fit]

    def rows(self) -> list[dict]:
        out = []
        for arm in self.arms:
            by_size = {repr(m.size): m for m in arm.multipliers}
            for size in arm.sizes:
                m = by_size.get(repr(size.value))
                row = {"arm": arm.name + (" (baseline)" if arm is self.baseline else "")}
                row.update({k: arm.settings.get(k, "") for k in self.keys})
                row.update({
                    self.key: size.value, "compute": size.compute, f"{self.metric} mean": size.mean,
                    f"{self.metric} std": size.std, "seeds": len(size.finals),
                    "fit": str(arm.fit) if arm.fit else arm.no_fit,
                    "exponent": arm.fit.b if arm.fit else None,
                    "exponent_low": arm.exponent_low, "exponent_high": arm.exponent_high,
                    "multiplier": m.value if m else None, "multiplier_low": m.low if m else None,
                    "multiplier_high": m.high if m else None,
                })
                out.append(row)
        return out


def _linked_keys(runs: list[Run], key: str) -> list[str]:
    """Config keys other than `key` whose value varies and is the same function of `key`'s value
    in every run: they change with the size (depth, heads, steps of one size)."""
    keys: list[str] = []
    for k in dict.fromkeys(k for r in runs for k in r.config):
        if k == key or k.startswith(IGNORED):
            continue
        seen: dict[str, str] = {}
        values = set()
        linked = True
        for run in runs:
            size, value = repr(run.config.get(key)), repr(run.config.get(k))
            values.add(value)
            if seen.setdefault(size, value) != value:
                linked = False
                break
        if linked and len(values) > 1:
            keys.append(k)
    return keys


def scale_arms(runs: list[Run], key: str, metric: str) -> tuple[list[ScaledArm], list[str], list[str]]:
    """Arms (config minus seed, `key` and the keys linked to it) with their sizes; the keys that
    differ between arms; the linked keys."""
    if key.startswith(IGNORED):
        raise ValueError(f"scale={key}: this key does not change what is learned; give a size key, "
                         f"e.g. scale=model.d_model")
    if not any(key in r.config for r in runs):
        raise ValueError(f"scale={key}: no run has this config key (e.g. scale=model.d_model)")
    linked = _linked_keys(runs, key)
    dropped = {key, *linked}
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(tuple(kv for kv in run.arm_key if kv[0] not in dropped), []).append(run)
    arms = []
    for i, group in enumerate(groups.values()):
        by_value: dict[str, Size] = {}
        for run in group:
            by_value.setdefault(repr(run.config.get(key)), Size(value=run.config.get(key), runs=[])).runs.append(run)
        sizes = sorted(by_value.values(), key=lambda s: _order(s.value))
        for size in sizes:
            done = [(r.final(metric), training_compute(r)) for r in size.runs]
            done = [(v, c) for v, c in done if v is not None and c is not None and math.isfinite(v)]
            size.finals = [v for v, _ in done]
            if done:
                size.mean, size.std = mean_std(size.finals)
                size.compute = sum(c for _, c in done) / len(done)
        arms.append(ScaledArm(name=f"arm {i}", runs=group, sizes=sizes))
    all_keys = list(dict.fromkeys(k for r in runs for k in r.config))
    keys = [k for k in all_keys if k not in dropped and not k.startswith(IGNORED)
            and len({repr(arm.runs[0].config.get(k)) for arm in arms}) > 1]
    for arm in arms:
        arm.settings = {k: _show(arm.runs[0].config.get(k)) for k in keys}
    return arms, keys, linked


def _fit(sizes: list[Size], means: list[float], irreducible: bool) -> PowerLaw:
    return fit_power_law([s.compute for s in sizes], means, irreducible=irreducible)


def _percentiles(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    lo = values[int(math.floor((1 - LEVEL) / 2 * (len(values) - 1)))]
    hi = values[int(math.ceil((1 + LEVEL) / 2 * (len(values) - 1)))]
    return lo, hi


def _multiplier(arm_fit: Optional[PowerLaw], base_loss: float, base_compute: float) -> Optional[float]:
    if arm_fit is None:
        return None
    needed = arm_fit.compute_for(base_loss)
    return base_compute / needed if needed else None


def _replicated(arm: ScaledArm) -> bool:
    return any(len(s.finals) > 1 for s in arm.scored)


def fit_arms(arms: list[ScaledArm], baseline: ScaledArm, irreducible: bool, seed: int = 0,
             resamples: int = BOOTSTRAP) -> None:
    """Each arm's power law and exponent interval, and its multipliers at the baseline's sizes,
    by a bootstrap that resamples the seeds within each size of each arm (a size with one seed
    stays fixed; an arm with one seed at every size has no interval)."""
    rng = random.Random(seed)
    for arm in arms:
        try:
            arm.fit = _fit(arm.scored, [s.mean for s in arm.scored], irreducible)
        except TooFewPoints as exc:
            arm.no_fit = str(exc)
    fits: dict[str, list[Optional[PowerLaw]]] = {arm.name: [] for arm in arms}
    base_losses: list[list[float]] = []
    for _ in range(resamples):
        for arm in arms:
            means = [sum(rng.choice(s.finals) for _ in s.finals) / len(s.finals) for s in arm.scored]
            if arm is baseline:
                base_losses.append(means)
            if arm.fit is not None:
                try:
                    fits[arm.name].append(_fit(arm.scored, means, irreducible))
                except ValueError:  # a resample the form cannot take: counted as undefined
                    fits[arm.name].append(None)
    for arm in arms:
        exponents = [f.b for f in fits[arm.name] if f is not None]
        if arm.fit is not None and exponents and _replicated(arm):
            arm.exponent_low, arm.exponent_high = _percentiles(exponents)
        if arm is baseline:
            continue
        own = {repr(s.value) for s in arm.scored}
        for j, size in enumerate(baseline.scored):
            m = Multiplier(size=size.value, value=_multiplier(arm.fit, size.mean, size.compute))
            extrapolated = repr(size.value) not in own
            if arm.fit is None:
                m.note = "no fit"
            elif m.value is None:
                m.note = "the arm's curve does not reach this loss"
            elif not (_replicated(arm) or _replicated(baseline)):
                m.note = "one seed: no interval"
            else:
                draws = [_multiplier(f, losses[j], size.compute) for f, losses in zip(fits[arm.name], base_losses)]
                good = [d for d in draws if d is not None]
                if len(good) == len(draws) and good:
                    m.low, m.high = _percentiles(good)
                else:
                    m.note = f"undefined in {len(draws) - len(good)} of {len(draws)} resamples: no interval"
            if extrapolated and m.value is not None:
                m.note = "; ".join(x for x in (m.note, "extrapolated: the arm has no result at this size") if x)
            arm.multipliers.append(m)


def compare_scaled(dirs: list[Path], out: Path, *, key: str, metric: str = "val/loss",
                   baseline: Optional[str] = None, plots: bool = True, irreducible: Optional[bool] = None) -> ScaleReport:
    """Read the sweeps in `dirs`, compare the arms across the sizes of `key`, write report.md,
    report.csv (and scaling.png) into `out`, and return the report. `irreducible`: fit e + a·C^-b
    (None: when every arm has at least MIN_POINTS_IRREDUCIBLE sizes)."""
    if not metric.rsplit("/", 1)[-1] in ("loss", "ppl"):
        raise ValueError(f"metric={metric}: scale= fits a loss falling with compute; use val/loss (or val/ppl)")
    runs, unreadable = load_runs(dirs, metric)
    arms, keys, linked = scale_arms(runs, key, metric)
    base = pick_baseline(arms, baseline)
    if irreducible is None:
        irreducible = all(len(a.scored) >= MIN_POINTS_IRREDUCIBLE for a in arms)
    fit_arms(arms, base, irreducible)
    report = ScaleReport(metric=metric, key=key, arms=arms, baseline=base, keys=keys, linked=linked,
                         irreducible=irreducible, unreadable=unreadable, notes=_gaps(arms, base, key, linked))
    make_out(out)
    report.files["csv"] = write_csv(report, out / "report.csv")
    if plots:
        report.files["scaling"] = plot_scaling(report, out / "scaling.png")
    report.files["md"] = write_scaled_markdown(report, out / "report.md", dirs)
    return report


def _gaps(arms: list[ScaledArm], baseline: ScaledArm, key: str, linked: list[str]) -> list[str]:
    """What the comparison cannot use, said rather than dropped: a size whose runs all ended
    without a finite metric or compute, a baseline with no result, an arm with one size."""
    notes = []
    for arm in arms:
        for size in arm.sizes:
            if size.mean is None:
                notes.append(f"{arm.name} at {key}={size.value}: no finished run with a finite metric and "
                             f"compute ({status_of(size.runs)}); left out of its fit")
    if not baseline.scored:
        notes.append(f"the baseline ({baseline.name}) has no result at any size: no multipliers")
    if arms and all(len({repr(s.value) for s in a.sizes}) <= 1 for a in arms):
        hint = f" (keys taken as part of a size: {', '.join(linked)})" if linked else ""
        notes.append(f"every arm has one size of {key}: a key that changes with both the arm and the size "
                     f"splits arms{hint}")
    return notes


def _sci(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.3g}"


def write_scaled_markdown(report: ScaleReport, path: Path, dirs) -> Path:
    m, k = report.metric, report.key
    form = "e + a · C^-b" if report.irreducible else "a · C^-b"
    lines = [f"# Sweep comparison across {k}: {m} against training compute", "",
             f"Runs from {', '.join(f'`{d}`' for d in dirs)}. A size is one value of `{k}`"
             + (f" (with {', '.join(f'`{x}`' for x in report.linked)}, which change with it)" if report.linked else "")
             + f"; an arm is a config without its seed and size. Training compute C = {BACKWARD_FACTOR} × forward "
             f"FLOPs per token (the summary's: 2 per weight of every matrix multiply, plus attention's "
             f"4·S·H·Dh per layer) × tokens seen. Each arm's {m} (mean over seeds) is fitted as "
             f"{m} = {form} by least squares on log {m}; the exponent's interval and the multipliers' are "
             f"{int(LEVEL * 100)}% bootstrap intervals ({BOOTSTRAP} resamples of the seeds within each size). "
             f"The compute multiplier of an arm at a size is the baseline's compute there divided by the compute "
             f"at which the arm's fitted curve reaches the baseline's {m} there: > 1 means the arm needs less. "
             f"With few seeds the bootstrap understates the spread (resampling n seeds shrinks the variance of "
             f"their mean by (n-1)/n, and the fit's own misfit is not resampled): read the intervals as "
             f"optimistic.", ""]
    all_sizes: dict[str, Any] = {}
    for arm in report.arms:
        for s in arm.sizes:
            all_sizes.setdefault(repr(s.value), s.value)
    values = sorted(all_sizes.values(), key=_order)
    head = ["arm", *report.keys, "fit", "exponent b [95% CI]", *[f"{k}={v}" for v in values], "runs"]
    lines += ["## Fits", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in report.arms:
        by_size = {repr(s.value): s for s in arm.sizes}
        exponent = "–" if arm.fit is None else (
            f"{arm.fit.b:.4f}" + (f" [{arm.exponent_low:.4f}, {arm.exponent_high:.4f}]"
                                  if arm.exponent_low is not None else ""))
        cells = [arm.name + (" (baseline)" if arm is report.baseline else ""),
                 *[f"`{arm.settings[x]}`" for x in report.keys], str(arm.fit) if arm.fit else f"none: {arm.no_fit}",
                 exponent]
        for v in values:
            own = by_size.get(repr(v))
            cells.append("–" if own is None or own.mean is None
                         else f"{own.mean:.4f} ± {own.std:.4f} (C={_sci(own.compute)})")
        cells.append(status_of(arm.runs))
        lines.append("| " + " | ".join(cells) + " |")
    others = [a for a in report.arms if a is not report.baseline]
    if others:
        sizes = report.baseline.scored
        head = ["arm", *report.keys, *[f"{k}={s.value}" for s in sizes]]
        lines += ["", f"## Compute multiplier against the baseline ({report.baseline.name})", "",
                  "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for arm in others:
            by_size = {repr(x.size): x for x in arm.multipliers}
            lines.append("| " + " | ".join([arm.name, *[f"`{arm.settings[x]}`" for x in report.keys],
                                            *[str(by_size.get(repr(s.value), "–")) for s in sizes]]) + " |")
        if sizes:
            lines += ["", f"At the largest size ({k}={sizes[-1].value}): "
                      + "; ".join(f"{arm.name} {next((str(x) for x in arm.multipliers if repr(x.size) == repr(sizes[-1].value)), '–')}"
                                  for arm in others) + "."]
    if report.warnings:
        lines += ["", "## Warnings", "", *[f"- {w}" for w in report.warnings]]
    if "scaling" in report.files:
        lines += ["", f"![{m} against training compute, log-log, one colour per arm]({report.files['scaling'].name})"]
    path.write_text("\n".join(lines) + "\n")
    return path
