"""Arms compared across model sizes (`zoo-compare SWEEP... scale=model.d_model`): does a change
keep paying as the model grows, and what is it worth in training compute?

A size is one value of KEY. An arm is every run with the same config except the seed, KEY, the
keys that change with KEY alone (a size that sets width, depth and training steps together is
one size) and, with `tune=KEY2`, KEY2: then each arm at each size is taken at its own best KEY2,
each seed measured at the value chosen on the other seeds (`zoo.compare.select`); a KEY2 value at
which any run of that size ended without a final result is failed for tuning there (never
chosen, never averaged over the seeds that finished).

For each arm and size: the training compute C = 3 · F · D (F the summary's forward FLOPs per
token, D the tokens seen; backward ≈ 2 × forward), the final metric (mean ± std over seeds),
and the accounting a reviewer asks for: N (non-embedding parameters), D, D/N and the epochs
over the training split. Each arm gets a power law L = a · C^-b (+ e, the irreducible loss, from
MIN_POINTS_IRREDUCIBLE sizes on) with its residuals, its fit error and a 95% interval for b that
is the wider of two: the seed bootstrap (seeds resampled within each size, refitted) and the
fit's own misfit (b ± t · se_b on n - parameters degrees of freedom). A fit through 3 sizes
has 1 residual degree of freedom and is called descriptive. The bootstrap is this module's, not
`scipy.stats.bootstrap`: its interval takes the outer order statistics of the refitted exponents
(`_percentiles`) where SciPy's percentile interval interpolates between them, and a resample the
form cannot fit is left out as undefined where SciPy's would make the whole interval NaN.

The compute multiplier of an arm at a size (`multiplier`) is the compute the baseline needs to
reach the arm's measured loss there, divided by the arm's compute there. The baseline's curve
at that size is its fitted power law moved to pass through its own measured loss at that size
(the fit gives the exchange rate between loss and compute, the measurement the level):

    M = (C_base / C_arm) · ((L_base - e) / (L_arm - e))^(1/b)

so an arm measured worse than the baseline at equal compute always gets M < 1, and a better one
M > 1, whatever the fits miss. Its 95% interval is the range of M over two 97.5% intervals taken
together (Bonferroni: both hold at once at least 95% of the time): the Student-t interval of the
difference in log(L - e) between the arms' seeds at that size (paired when they ran the same
seeds) and the interval of the baseline's exponent (the wider of seed bootstrap and misfit).
A bootstrap of 2 or 3 seeds is far too narrow for this (2 seeds give 3 possible means), and at
equal compute this interval spans 1 exactly when the loss difference's spans 0.
Too few sizes for a fit: said, never faked."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.compare.errors import CompareError
from zoo.compare.escape import code, text
from zoo.compare.plots import plot_scaling
from zoo.compare.powerlaw import MIN_POINTS_IRREDUCIBLE, PowerLaw, TooFewPoints, fit_power_law
from zoo.compare.report import (
    FLAG_SENTENCE,
    RUNS_SENTENCE,
    _show,
    design_line,
    load_runs,
    make_out,
    pick_baseline,
    problem_lines,
    status_of,
    write_csv,
)
from zoo.compare.runs import IGNORED, Run, epochs
from zoo.compare.runs import number as _number
from zoo.compare.select import Choice, leave_one_seed_out
from zoo.compare.stats import difference, mean_std
from zoo.compare.table import write_heldout, write_runs
from zoo.compare.tune import _order, heldout_rows, lower_is_better
from zoo.compare.verdict import label
from zoo.config.records.atomic import write_text

BACKWARD_FACTOR = 3  # training FLOPs per token = forward + backward ≈ 3 × forward
BOOTSTRAP = 1000  # resamples of the seeds
LEVEL = 0.95
DESCRIPTIVE_SIZES = 3  # a fit through this many sizes or fewer describes them; it does not predict
DN_SPREAD = 1.1  # D/N of an arm's sizes differing by more than this factor is said


def active_params(run: Run) -> float | None:
    """The non-embedding parameters one token passes through (model.ffn=moe: the router, top-k
    and shared experts), from the run's summary; a record without them (a dense model, or one
    written before they were counted) its non-embedding parameters."""
    active = _number(run, "model", "active_non_embedding_params")
    return active if active else _number(run, "model", "non_embedding_params")


def training_compute(run: Run) -> float | None:
    """3 × forward FLOPs/token × tokens seen, from the run's summary; None when it lacks them.
    The FLOPs per token are the active ones (a mixture's router, top-k and shared experts)."""
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
    compute: float | None = None  # mean over the measured runs
    mean: float | None = None
    std: float | None = None
    finals: list[float] = field(default_factory=list)
    by_seed: dict[Any, float] = field(default_factory=dict)  # seed -> final metric (pairs the arms)
    params: float | None = None  # N: active non-embedding parameters (all of them for a dense model)
    total_params: float | None = None  # every non-embedding parameter (a mixture's experts all)
    tokens: float | None = None  # D: tokens seen
    epochs: float | None = None  # D over the training split's tokens
    tuned: Any = None  # with tune=: the value chosen on all seeds
    curve: list[tuple[Any, float | None]] = field(default_factory=list)  # with tune=: (value, mean)
    held_out: bool = True  # with tune=: each seed measured at a value chosen without it
    choice: Choice | None = None  # with tune=: the choice, with the values failed for tuning
    points: list[Any] = field(default_factory=list)  # with tune=: (value, runs) objects, in `choice`'s order
    residual: float | None = None  # log(mean) - log(the arm's fit) at this size

    @property
    def result(self) -> tuple[float, float]:
        """(compute, mean) of a size with a result (an arm's `scored` sizes); a size without
        one is a caller's mistake."""
        if self.compute is None or self.mean is None:
            raise RuntimeError(f"size {self.value!r} has no result")
        return self.compute, self.mean

    def seed_values(self) -> dict[Any, float]:
        """seed -> final metric; a size built without seeds numbers its values (never paired)."""
        return self.by_seed or {(id(self), i): v for i, v in enumerate(self.finals)}

    @property
    def tokens_per_param(self) -> float | None:
        return self.tokens / self.params if self.tokens and self.params else None


@dataclass
class Multiplier:
    """An arm's compute multiplier against the baseline at one of the arm's sizes."""

    size: Any
    value: float | None  # None: undefined (said in note)
    low: float | None = None
    high: float | None = None
    note: str = ""

    def __str__(self) -> str:
        if self.value is None:
            return f"– ({self.note})" if self.note else "–"
        text = _times(self.value)
        if self.low is not None and self.high is not None:
            text += f" [{_times(self.low, False)}, {_times(self.high, False)}]"
        if self.note:
            text += f" ({self.note})"
        return text

    @property
    def verdict(self) -> str:
        """ "more" / "less" compute than the baseline, or "unresolved" when its interval spans 1."""
        if self.low is None or self.high is None:
            return "no interval"
        if self.low > 1:
            return "saves compute"
        if self.high < 1:
            return "costs compute"
        return "unresolved"


def _times(value: float, sign: bool = True) -> str:
    if math.isinf(value):
        text = "∞"
    elif value >= 100:
        text = f"{value:.2g}"
    else:
        text = f"{value:.2f}"
    return text + ("×" if sign else "")


@dataclass
class ScaledArm:
    name: str  # "arm N"
    runs: list[Run]
    sizes: list[Size]  # in increasing order of KEY
    settings: dict[str, str] = field(default_factory=dict)
    fit: PowerLaw | None = None
    exponent_low: float | None = None  # the wider of the two intervals below
    exponent_high: float | None = None
    seed_interval: tuple[float, float] | None = None  # seed bootstrap
    fit_interval: tuple[float, float] | None = None  # the fit's misfit: b ± t·se_b
    no_fit: str = ""  # why there is no fit
    multipliers: list[Multiplier] = field(default_factory=list)  # at each of the arm's sizes

    @property
    def scored(self) -> list[Size]:
        return [s for s in self.sizes if s.mean is not None and s.compute is not None]

    @property
    def replicated(self) -> bool:
        return any(len(s.finals) > 1 for s in self.scored)


@dataclass
class ScaleReport:
    metric: str
    key: str
    arms: list[ScaledArm]
    baseline: ScaledArm
    keys: list[str]  # settings that differ between arms
    linked: list[str]  # keys that change with KEY (part of a size)
    irreducible: bool
    tune: str | None = None  # KEY2 of tune=, chosen per arm and size
    files: dict[str, Path] = field(default_factory=dict)
    unreadable: list[Run] = field(default_factory=list)

    notes: list[str] = field(default_factory=list)  # what the data left out, said once each
    family: int = 0  # the multipliers with an interval: one family, adjusted together

    def family_sentence(self) -> str:
        """The report's declaration of its family of comparisons: the multipliers."""
        left = [
            f"{a.name} at {self.key}={m.size} ({m.note})"
            for a in self.arms
            for m in a.multipliers
            if m.low is None and m.note
        ]
        if self.family == 0:
            text = "Multiplicity: no compute multiplier has an interval, so nothing is adjusted."
        elif self.family == 1:
            text = (
                "Multiplicity: the family is the one compute multiplier with an interval; nothing is adjusted "
                "(its interval is at 95%)."
            )
        else:
            text = (
                f"Multiplicity: one family of {self.family} comparisons, every compute multiplier with an "
                f"interval (each arm other than the baseline at each of its sizes). Each multiplier's interval "
                f"is at the {100 * (1 - (1 - LEVEL) / self.family):.2f}% level (its two parts at "
                f"{100 * family_box(self.family):.2f}%): Bonferroni, so all {self.family} hold together with "
                f"at least 95% probability (Holm's step-down needs a p-value, which a range of multipliers "
                f"does not have). The exponent intervals describe each arm's own fit and are not in the family."
            )
        if left:
            text += " Left out of the family (no interval): " + "; ".join(left) + "."
        return text

    def verdict(self) -> str:
        """The opening sentence: at the largest size every arm reached, which arm has the best
        measured metric, and its multiplier against the baseline with its adjusted interval."""
        lower = lower_is_better(self.metric)
        common = None
        for arm in self.arms:
            values = {repr(s.value): s.value for s in arm.scored}
            common = values if common is None else {k: v for k, v in common.items() if k in values}
        if not common or len(self.arms) < 2:
            return "Verdict: no size has a result for every arm; there is nothing to compare."
        largest = max(common.values(), key=_order)
        at = {a.name: next(s for s in a.scored if repr(s.value) == repr(largest)) for a in self.arms}
        best = (min if lower else max)(self.arms, key=lambda a: at[a.name].result[1])
        where = f"{self.key}={largest}"
        lead = (
            f"Verdict: at the largest size every arm reached ({where}), {label(best)} has the "
            f"{'lowest' if lower else 'highest'} mean {self.metric} ({at[best.name].mean:.4f})."
        )
        if best is self.baseline:
            undecided = [a for a in self.arms if a is not best and not _decided(a, largest, "costs compute")]
            if not undecided:
                return lead + " Every other arm's compute multiplier there is below 1 with its adjusted interval."
            return (
                lead
                + " The data cannot tell it from "
                + ", ".join(label(a) for a in undecided)
                + ": their multipliers' adjusted intervals there span 1 or are missing."
            )
        m = next((x for x in best.multipliers if repr(x.size) == repr(largest)), None)
        if m is None or m.value is None:
            return lead + " It has no compute multiplier against the baseline there."
        if m.low is None:
            return lead + f" Its compute multiplier against the baseline there is {m}: the data cannot tell."
        sure = (
            "the adjusted interval is above 1: it saves compute"
            if m.low > 1
            else "the adjusted interval spans 1: the data cannot tell it from the baseline"
        )
        others = "" if len(self.arms) == 2 else " It is compared with the baseline only."
        return lead + f" Its compute multiplier against the baseline there is {m}; {sure}.{others}"

    @property
    def warnings(self) -> list[str]:
        return self.notes + [f"{arm.name}: no power law: {arm.no_fit}" for arm in self.arms if arm.no_fit]

    def rows(self) -> list[dict]:
        out = []
        for arm in self.arms:
            by_size = {repr(m.size): m for m in arm.multipliers}
            for size in arm.sizes:
                m = by_size.get(repr(size.value))
                row: dict[str, Any] = {"arm": arm.name + (" (baseline)" if arm is self.baseline else "")}
                row.update({k: arm.settings.get(k, "") for k in self.keys})
                row[self.key] = size.value
                if self.tune:
                    row[f"best {self.tune}"] = size.tuned
                row.update(
                    {
                        "compute": size.compute,
                        f"{self.metric} mean": size.mean,
                        f"{self.metric} std": size.std,
                        "seeds": len(size.finals),
                        "N": size.params,
                        "N total": size.total_params,
                        "D": size.tokens,
                        "D/N": size.tokens_per_param,
                        "epochs": size.epochs,
                        "fit": str(arm.fit) if arm.fit else arm.no_fit,
                        "residual": size.residual,
                        "rmse_log": arm.fit.rmse_log if arm.fit else None,
                        "fit_df": arm.fit.df if arm.fit else None,
                        "exponent": arm.fit.b if arm.fit else None,
                        "exponent_low": arm.exponent_low,
                        "exponent_high": arm.exponent_high,
                        "exponent_seed_low": arm.seed_interval[0] if arm.seed_interval else None,
                        "exponent_seed_high": arm.seed_interval[1] if arm.seed_interval else None,
                        "exponent_fit_low": arm.fit_interval[0] if arm.fit_interval else None,
                        "exponent_fit_high": arm.fit_interval[1] if arm.fit_interval else None,
                        "multiplier": m.value if m else None,
                        "multiplier_low": m.low if m else None,
                        "multiplier_high": m.high if m else None,
                    }
                )
                out.append(row)
        return out


def _linked_keys(runs: list[Run], key: str, tune: str | None = None) -> list[str]:
    """Config keys other than `key` (and `tune`) whose value varies and is the same function
    of `key`'s value in every run: they change with the size (depth, heads, steps of one size)."""
    keys: list[str] = []
    for k in dict.fromkeys(k for r in runs for k in r.config):
        if k in (key, tune) or k.startswith(IGNORED):
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


def _check_key(runs: list[Run], key: str, option: str, example: str) -> None:
    if key.startswith(IGNORED):
        raise CompareError(
            f"{option}={key}: this key does not change what is learned; give a config key, e.g. {option}={example}"
        )
    if not any(key in r.config for r in runs):
        raise CompareError(f"{option}={key}: no run has this config key (e.g. {option}={example})")


def _measure(size: Size, runs: list[Run], metric: str) -> None:
    """Fill `size` from `runs`, the runs it is measured on (one per seed)."""
    measured = [(r, r.final(metric), training_compute(r)) for r in runs]
    done = [(r, v, c) for r, v, c in measured if v is not None and c is not None and math.isfinite(v)]
    size.finals = [v for _, v, _ in done]
    size.by_seed = {r.seed: v for r, v, _ in done} if len({r.seed for r, _, _ in done}) == len(done) else {}
    if not done:
        return
    size.mean, size.std = mean_std(size.finals)
    size.compute = sum(c for _, _, c in done) / len(done)
    for attr, read in (
        ("params", active_params),
        ("total_params", lambda r: _number(r, "model", "non_embedding_params")),
        ("tokens", lambda r: _number(r, "tokens_seen")),
        ("epochs", epochs),
    ):
        values = [v for v in (read(r) for r, _, _ in done) if v is not None]
        setattr(size, attr, sum(values) / len(values) if values else None)


def _tuned(size: Size, key: str, metric: str) -> None:
    """`size` at its own best value of `key`: each seed's run at the value chosen on the others."""
    by_value: dict[str, list[Run]] = {}
    values: dict[str, Any] = {}
    for run in size.runs:
        by_value.setdefault(repr(run.config.get(key)), []).append(run)
        values.setdefault(repr(run.config.get(key)), run.config.get(key))
    order = sorted(by_value, key=lambda v: _order(values[v]))
    points, failed = [], []
    for v in order:
        finals = {}
        for run in by_value[v]:
            value, compute = run.final(metric), training_compute(run)
            if value is not None and compute is not None and math.isfinite(value):
                finals[run.seed] = value
        points.append(finals)
        failed.append(len(finals) < len(by_value[v]))  # a run without a result: failed for tuning
    choice = leave_one_seed_out(points, lower_is_better(metric), failed=failed)
    size.choice = choice
    size.points = [_Value(values[v], by_value[v]) for v in order]
    size.curve = [(values[v], (sum(p.values()) / len(p)) if p else None) for v, p in zip(order, points)]
    size.tuned = values[order[choice.best]] if choice.best is not None else None
    size.held_out = choice.held_out
    measured = [next(r for r in by_value[order[i]] if r.seed == seed) for seed, i in choice.chosen.items()]
    _measure(size, measured, metric)


@dataclass
class _Value:
    """One value of the tune= key at one size: the value and its runs (heldout.csv reads them)."""

    value: Any
    runs: list[Run]


def scale_arms(
    runs: list[Run], key: str, metric: str, tune: str | None = None
) -> tuple[list[ScaledArm], list[str], list[str]]:
    """Arms (config minus seed, `key`, the keys linked to it and `tune`) with their sizes; the
    keys that differ between arms; the linked keys."""
    _check_key(runs, key, "scale", "model.d_model")
    if tune is not None:
        _check_key(runs, tune, "tune", "optim.lr")
        if tune == key:
            raise CompareError(f"scale={key} and tune={tune} name the same key; tune another, e.g. tune=optim.lr")
    linked = _linked_keys(runs, key, tune)
    dropped = {key, *linked, *([tune] if tune else [])}
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
            if tune is not None:
                _tuned(size, tune, metric)
            else:
                _measure(size, size.runs, metric)
        arms.append(ScaledArm(name=f"arm {i}", runs=group, sizes=sizes))
    all_keys = list(dict.fromkeys(k for r in runs for k in r.config))
    keys = [
        k
        for k in all_keys
        if k not in dropped and not k.startswith(IGNORED) and len({repr(arm.runs[0].config.get(k)) for arm in arms}) > 1
    ]
    for arm in arms:
        arm.settings = {k: _show(arm.runs[0].config.get(k)) for k in keys}
    return arms, keys, linked


def _fit(sizes: list[Size], means: list[float], irreducible: bool) -> PowerLaw:
    return fit_power_law([s.result[0] for s in sizes], means, irreducible=irreducible)


def _percentiles(values: list[float], level: float = LEVEL) -> tuple[float, float]:
    values = sorted(values)
    lo = values[int(math.floor((1 - level) / 2 * (len(values) - 1)))]
    hi = values[int(math.ceil((1 + level) / 2 * (len(values) - 1)))]
    return lo, hi


BOX = 1 - (1 - LEVEL) / 2  # each of the two intervals behind a multiplier's: 97.5%


def multiplier_interval(
    b_low: float, b_high: float, e: float, base: Size, arm: Size, level: float = BOX
) -> tuple[float, float] | None:
    """The range of `multiplier` over the BOX-level t interval of the difference in log(L - e)
    between the two sizes' seeds and the exponent range [b_low, b_high]; None when the seeds
    give no interval (one seed on both sides). An exponent range reaching 0 leaves the side
    of 1 the losses point to unbounded (∞ or 0)."""
    base_logs = {s: math.log(v - e) for s, v in base.seed_values().items() if v > e}
    arm_logs = {s: math.log(v - e) for s, v in arm.seed_values().items() if v > e}
    diff = difference(base_logs, arm_logs, level=level)  # > 0: the arm is lower
    if diff is None or diff.low is None or diff.high is None:
        return None
    shift = math.log(base.result[0]) - math.log(arm.result[0])
    values = []
    for delta in (diff.low, diff.high):
        for b in (b_low, b_high):
            if b > 0:
                values.append(shift + delta / b)
            elif delta != 0:
                values.append(math.inf if delta > 0 else -math.inf)
            else:
                values.append(shift)
    if b_low <= 0 < b_high:  # b in (0, b_high]: delta / b runs off to ±∞ as b falls to 0
        if diff.high > 0:
            values.append(math.inf)
        if diff.low < 0:
            values.append(-math.inf)
    low, high = min(values), max(values)
    return (math.exp(low) if low < 700 else math.inf), (math.exp(high) if high < 700 else math.inf)


def interval_gap(base: Size, arm: Size) -> str:
    """Why a multiplier has no interval: one seed on a side, or seeds without spread."""
    if len(base.finals) < 2 and len(arm.finals) < 2:
        return "one seed: no interval"
    if len(base.finals) < 2 or len(arm.finals) < 2:
        return "fewer than 2 seeds on a side: no interval"
    return "zero spread over the seeds: no interval"


def multiplier(b: float, e: float, base_loss: float, base_compute: float, arm_loss: float, arm_compute: float) -> float:
    """The compute the baseline needs to reach `arm_loss`, over `arm_compute`: the baseline's
    curve L = e + (base_loss - e) · (C / base_compute)^-b passes through its measured point.
    A curve that does not fall (b <= 0) never reaches a lower loss (∞) and is at any higher loss
    already (0); an arm loss at or below e is never reached (∞)."""
    if arm_loss <= e:
        return math.inf
    log_ratio = math.log(base_loss - e) - math.log(arm_loss - e)  # > 0: the arm is lower
    if b <= 0:
        return math.inf if log_ratio > 0 else (base_compute / arm_compute if log_ratio == 0 else 0.0)
    log_m = math.log(base_compute) - math.log(arm_compute) + log_ratio / b
    return math.exp(log_m) if log_m < 700 else math.inf


def fit_arms(
    arms: list[ScaledArm], baseline: ScaledArm, irreducible: bool, seed: int = 0, resamples: int = BOOTSTRAP
) -> int:
    """Each arm's power law, residuals and exponent interval (the wider of a bootstrap that
    resamples the seeds within each size, a size with one seed staying fixed, and the fit's
    misfit), and its multipliers at its own sizes against the baseline (`multiplier_interval`),
    adjusted as one family; returns the family's size (the multipliers with an interval)."""
    rng = random.Random(seed)
    for arm in arms:
        try:
            arm.fit = _fit(arm.scored, [s.result[1] for s in arm.scored], irreducible)
        except TooFewPoints as exc:
            arm.no_fit = str(exc)
            continue
        for s in arm.scored:
            s.residual = arm.fit.residual(*s.result)
        arm.fit_interval = arm.fit.exponent_interval(LEVEL)
    fits: dict[str, list[PowerLaw | None]] = {arm.name: [] for arm in arms}
    for _ in range(resamples):
        for arm in arms:
            drawn = [sum(rng.choice(s.finals) for _ in s.finals) / len(s.finals) for s in arm.scored]
            if arm.fit is not None:
                try:
                    fits[arm.name].append(_fit(arm.scored, drawn, irreducible))
                except ValueError:  # a resample the form cannot take: counted as undefined
                    fits[arm.name].append(None)
    for arm in arms:
        if arm.fit is None:
            continue
        exponents = [f.b for f in fits[arm.name] if f is not None]
        if exponents and arm.replicated:
            arm.seed_interval = _percentiles(exponents)
        bounds = [i for i in (arm.seed_interval, arm.fit_interval) if i is not None]
        if bounds:
            arm.exponent_low, arm.exponent_high = min(i[0] for i in bounds), max(i[1] for i in bounds)
    exponents = [f.b for f in fits[baseline.name] if f is not None]
    family = _multipliers(arms, baseline, exponents, BOX)
    if family > 1:  # one family: every multiplier with an interval, each at 1 − 0.05/m (Bonferroni)
        _multipliers(arms, baseline, exponents, family_box(family))
    return family


def family_box(m: int) -> float:
    """The level of each of the two intervals behind a multiplier's when m multipliers form one
    family: 1 − 0.05/(2m), so each multiplier's interval holds at 1 − 0.05/m and all m together at
    95% or more (Bonferroni)."""
    return 1 - (1 - LEVEL) / (2 * max(m, 1))


def _multipliers(arms: list[ScaledArm], baseline: ScaledArm, exponents: list[float], box: float) -> int:
    """Every arm's multipliers against the baseline at its sizes, with intervals from two `box`
    intervals together; returns how many have an interval (the family's size)."""
    base_fit = baseline.fit
    base_sizes = {repr(s.value): s for s in baseline.scored}
    b_range: tuple[float, float] | None = None
    if base_fit is not None:  # the baseline's exponent at the box level: seed bootstrap and misfit
        bounds = [i for i in (base_fit.exponent_interval(box),) if i is not None]
        if exponents and baseline.replicated:
            bounds.append(_percentiles(exponents, box))
        b_range = (min(i[0] for i in bounds), max(i[1] for i in bounds)) if bounds else (base_fit.b, base_fit.b)
    count = 0
    for arm in arms:
        if arm is baseline:
            continue
        arm.multipliers = []
        for size in arm.scored:
            m = Multiplier(size=size.value, value=None)
            arm.multipliers.append(m)
            if base_fit is None or b_range is None:  # both None or neither
                m.note = "the baseline has no fit"
                continue
            if base_fit.b <= 0:
                m.note = "the baseline's loss does not fall with compute"
                continue
            own = base_sizes.get(repr(size.value))
            compute, mean = size.result
            if own is None:  # the baseline has no result here: its fitted curve stands in
                m.note = "the baseline has no result at this size: its fitted curve stands in; no interval"
                m.value = multiplier(base_fit.b, base_fit.e, base_fit.loss_at(compute), compute, mean, compute)
                continue
            base_compute, base_mean = own.result
            m.value = multiplier(base_fit.b, base_fit.e, base_mean, base_compute, mean, compute)
            interval = multiplier_interval(*b_range, base_fit.e, own, size, level=box)
            if interval is None:
                m.note = interval_gap(own, size)
            else:
                m.low, m.high = interval
                count += 1
    return count


def compare_scaled(
    dirs: list[Path],
    out: Path,
    *,
    key: str,
    metric: str = "val/loss",
    baseline: str | None = None,
    plots: bool = True,
    irreducible: bool | None = None,
    tune: str | None = None,
    found: tuple[list[Run], list[Run]] | None = None,
) -> ScaleReport:
    """Read the sweeps in `dirs`, compare the arms across the sizes of `key` (each at its own best
    `tune` value when given), write report.md, report.csv (and scaling.png) into `out`, and
    return the report. `irreducible`: fit e + a·C^-b (None: when every arm has at least
    MIN_POINTS_IRREDUCIBLE sizes). Also writes runs.csv and, with tune=, heldout.csv; `found`: runs
    and runs left out already read, instead of `dirs`'."""
    if metric.rsplit("/", 1)[-1] not in ("loss", "ppl", "bpb"):
        raise CompareError(
            f"metric={metric}: scale= fits a loss falling with compute; use val/loss, val/bpb or val/ppl"
        )
    runs, unreadable = found if found is not None else load_runs(dirs, metric)
    arms, keys, linked = scale_arms(runs, key, metric, tune)
    base = pick_baseline(arms, baseline)
    if irreducible is None:
        irreducible = all(len(a.scored) >= MIN_POINTS_IRREDUCIBLE for a in arms)
    family = fit_arms(arms, base, irreducible)
    report = ScaleReport(
        family=family,
        metric=metric,
        key=key,
        arms=arms,
        baseline=base,
        keys=keys,
        linked=linked,
        irreducible=irreducible,
        tune=tune,
        unreadable=unreadable,
        notes=_gaps(arms, base, key, linked) + _design_warnings(arms, key, tune),
    )
    make_out(out)
    report.files["csv"] = write_csv(report, out / "report.csv")
    report.files.update(write_runs(report, out, kind="scaled", scale=key, tune=tune, irreducible=irreducible))
    if tune:
        report.files["heldout_csv"] = write_heldout(heldout_rows(arms, tune, metric, size_key=key), out)
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
                notes.append(
                    f"{arm.name} at {key}={size.value}: no finished run with a finite metric and "
                    f"compute ({status_of(size.runs)}); left out of its fit"
                )
    if not baseline.scored:
        notes.append(f"the baseline ({baseline.name}) has no result at any size: no multipliers")
    if arms and all(len({repr(s.value) for s in a.sizes}) <= 1 for a in arms):
        hint = f" (keys taken as part of a size: {', '.join(linked)})" if linked else ""
        notes.append(
            f"every arm has one size of {key}: a key that changes with both the arm and the size splits arms{hint}"
        )
    return notes


def _design_warnings(arms: list[ScaledArm], key: str, tune: str | None) -> list[str]:
    """What makes the comparison weaker than it looks, said once each: fits through 3 sizes or
    fewer, 2 seeds, sizes that repeat data or train on different D/N, tuning without hold-out."""
    out = []
    fitted = [a for a in arms if a.fit is not None]
    few = sorted({len(a.scored) for a in fitted})
    if few and min(few) <= DESCRIPTIVE_SIZES:
        df = min(a.fit.df for a in fitted if a.fit is not None)
        out.append(
            f"the fits go through {min(few)} sizes ({df} residual degree{'s' if df != 1 else ''} of freedom): "
            f"they are descriptive, not laws to extrapolate; exponent intervals include the fit's misfit"
        )
    seeds = sorted({len(s.finals) for a in arms for s in a.scored})
    if seeds and seeds[0] == 2:
        out.append("some sizes rest on 2 seeds (1 degree of freedom): their spread is a guess; run 3 or more")
    for arm in arms:
        for s in arm.scored:
            if s.epochs is not None and s.epochs > 1.0:
                out.append(
                    f"{arm.name} at {key}={s.value} reads its training split {s.epochs:.2f} times: "
                    f"the later passes repeat data (fewer steps or a larger corpus avoid it)"
                )
        ratios = [s.tokens_per_param for s in arm.scored if s.tokens_per_param]
        if len(ratios) > 1 and max(ratios) > DN_SPREAD * min(ratios):
            out.append(
                f"{arm.name}: tokens per parameter differ across sizes ({', '.join(f'{r:.1f}' for r in ratios)}): "
                f"the sizes are not trained alike, which the curve absorbs"
            )
    scored = [s for a in arms for s in a.scored]
    if scored and all(s.epochs is None for s in scored):
        out.append("the runs do not record their training split's size: epochs are not known")
    if tune and any(not s.held_out for a in arms for s in a.scored):
        out.append(
            f"some sizes ran one seed: their best {tune} was chosen and measured on that seed "
            f"(winner's curse: optimistic)"
        )
    for arm in arms:
        for s in arm.sizes:
            if s.choice is None:
                continue
            for i in s.choice.failed:
                out.append(
                    f"{arm.name} at {key}={s.value}: {tune}={s.points[i].value} is failed for tuning (a run "
                    f"there ended without a final result); never chosen, never averaged over the seeds "
                    f"that finished"
                )
            if s.choice.unmeasured:
                out.append(
                    f"{arm.name} at {key}={s.value}: seed(s) {', '.join(map(str, s.choice.unmeasured))} have "
                    f"no run at the {tune} the other seeds chose: not measured"
                )
        for s in arm.scored:
            if len(s.finals) < 2:
                out.append(
                    f"{arm.name} at {key}={s.value}: fewer than 2 seeds with a result: no spread, and its "
                    f"multiplier has no interval"
                )
            elif all(v == s.finals[0] for v in s.finals):
                out.append(f"{arm.name} at {key}={s.value}: zero spread over its seeds: its multiplier has no interval")
    return out


def _decided(arm: ScaledArm, size: Any, verdict: str) -> bool:
    m = next((x for x in arm.multipliers if repr(x.size) == repr(size)), None)
    return m is not None and m.verdict == verdict


def _sci(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * (math.exp(value) - 1):+.1f}%"


def write_scaled_markdown(report: ScaleReport, path: Path, dirs) -> Path:
    m, k = text(report.metric), text(report.key)  # copied from runs and the command line, like the keys
    form = "e + a · C^-b" if report.irreducible else "a · C^-b"
    tuned = (
        f" Each arm at each size is taken at its own best {code(report.tune)}: each seed measured at the value "
        f"chosen on the other seeds (leave one seed out), so no seed both chooses and measures."
        if report.tune
        else ""
    )
    lines = [
        f"# Sweep comparison across {k}: {m} against training compute",
        "",
        text(report.verdict()),
        "",
        f"Runs from {', '.join(code(d) for d in dirs)}. A size is one value of {code(report.key)}"
        + (f" (with {', '.join(code(x) for x in report.linked)}, which change with it)" if report.linked else "")
        + f"; an arm is a config without its seed and size.{tuned} Training compute C = {BACKWARD_FACTOR} × "
        f"forward FLOPs per token (the summary's: 2 per weight of every matrix multiply, plus attention's "
        f"4·S·H·Dh per layer) × tokens seen D; N counts non-embedding parameters; epochs = D over the "
        f"training split's tokens. Each arm's {m} (mean over seeds) is fitted as {m} = {form} by least "
        f"squares on log {m}; the residual at each size is the measured {m} against the fit's, in percent. "
        f"The exponent's {int(LEVEL * 100)}% interval is the wider of a seed bootstrap ({BOOTSTRAP} resamples "
        f"of the seeds within each size, refitted) and the fit's own misfit (b ± t · se, on the fit's "
        f"residual degrees of freedom).",
        "",
        f"The compute multiplier of an arm at a size is the compute the baseline needs to reach the arm's "
        f"measured {m} there, divided by the arm's compute there; the baseline's curve there is its fit "
        f"moved through its own measured {m} at that size: M = (C_base / C_arm) · ((L_base − e) / "
        f"(L_arm − e))^(1/b). M > 1: the arm reaches its loss with less compute than the baseline would "
        f"need; an arm measured worse at equal compute always has M < 1. Its interval "
        f"is the range of M over two intervals together (each at {BOX * 100:.1f}% for one multiplier; "
        f"adjusted for the family below): the Student-t interval of the "
        f"difference in log({m} − e) between the arms' seeds at that size (paired when they ran the same "
        f"seeds) and the baseline's exponent interval; an interval that spans 1 does not say which arm "
        f"needs less compute. {FLAG_SENTENCE} {RUNS_SENTENCE}",
        "",
        text(report.family_sentence()),
        "",
    ]
    lines += ["## Design", "", design_line([r for a in report.arms for r in a.runs]), ""] + _design_lines(report)
    all_sizes: dict[str, Any] = {}
    for arm in report.arms:
        for s in arm.sizes:
            all_sizes.setdefault(repr(s.value), s.value)
    values = sorted(all_sizes.values(), key=_order)
    sizes = [text(f"{report.key}={v}") for v in values]
    head = ["arm", *map(text, report.keys), "fit", "fit error (rms)", "exponent b [95% CI]", *sizes, "runs"]
    lines += [
        "## Fits",
        "",
        f"Each size: {m} mean ± std over seeds (residual against the fit)"
        + (f"; the chosen {text(report.tune)}" if report.tune else "")
        + ".",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for arm in report.arms:
        by_size = {repr(s.value): s for s in arm.sizes}
        exponent = (
            "–"
            if arm.fit is None
            else (
                f"{arm.fit.b:.4f}"
                + (f" [{arm.exponent_low:.4f}, {arm.exponent_high:.4f}]" if arm.exponent_low is not None else "")
            )
        )
        cells = [
            arm.name + (" (baseline)" if arm is report.baseline else ""),
            *[code(arm.settings[x]) for x in report.keys],
            str(arm.fit) if arm.fit else f"none: {arm.no_fit}",
            f"{100 * arm.fit.rmse_log:.2f}% ({arm.fit.df} df)" if arm.fit else "–",
            exponent,
        ]
        for v in values:
            own = by_size.get(repr(v))
            if own is None or own.mean is None:
                cells.append("–")
                continue
            spread = f" ± {own.std:.4f}" if len(own.finals) > 1 else ""
            text_ = f"{own.mean:.4f}{spread} (n={len(own.finals)}, {_pct(own.residual)})"
            if report.tune:
                text_ += f", {code(f'{report.tune}={own.tuned}')}"
            cells.append(text_)
        cells.append(status_of(arm.runs))
        lines.append("| " + " | ".join(cells) + " |")
    lines += problem_lines([r for a in report.arms for r in a.runs], report.unreadable)
    others = [a for a in report.arms if a is not report.baseline]
    if others:
        head = ["arm", *map(text, report.keys), *sizes]
        lines += [
            "",
            f"## Compute multiplier against the baseline ({report.baseline.name})",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for arm in others:
            multiplier_at = {repr(x.size): x for x in arm.multipliers}
            lines.append(
                "| "
                + " | ".join(
                    [
                        arm.name,
                        *[code(arm.settings[x]) for x in report.keys],
                        *[str(multiplier_at.get(repr(v), "–")) for v in values],
                    ]
                )
                + " |"
            )
        largest = values[-1] if values else None
        if largest is not None:
            parts = []
            for arm in others:
                at = next((x for x in arm.multipliers if repr(x.size) == repr(largest)), None)
                if at is None or at.value is None:
                    parts.append(f"{arm.name} –")
                else:  # a multiplier without an interval already says why in its note
                    parts.append(f"{arm.name} {at}" + ("" if at.low is None else f" ({at.verdict})"))
            lines += ["", f"At the largest size ({text(f'{report.key}={largest}')}): " + "; ".join(parts) + "."]
    if report.warnings:
        lines += ["", "## Warnings", "", *[f"- {text(w)}" for w in report.warnings]]
    if "scaling" in report.files:
        lines += ["", f"![{m} against training compute, log-log, one colour per arm]({report.files['scaling'].name})"]
    write_text(path, "\n".join(lines) + "\n")
    return path


def _design_lines(report: ScaleReport) -> list[str]:
    """The design table: per size, N, D, D/N, epochs and seeds (from the baseline's runs, or the
    first arm with results there)."""
    by_value: dict[str, Size] = {}
    for arm in [report.baseline, *report.arms]:
        for s in arm.scored:
            by_value.setdefault(repr(s.value), s)
    if not by_value:
        return []
    sizes = sorted(by_value.values(), key=lambda s: _order(s.value))
    lines = [
        f"| {text(report.key)} | N (non-emb., active) | N total | D (tokens) | D/N | epochs | compute C | seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        seeds = sorted({len(x.finals) for a in report.arms for x in a.scored if repr(x.value) == repr(s.value)})
        lines.append(
            f"| {code(s.value)} | {_count(s.params)} | {_count(s.total_params)} | {_count(s.tokens)} | "
            f"{'–' if s.tokens_per_param is None else f'{s.tokens_per_param:.2f}'} | "
            f"{'–' if s.epochs is None else f'{s.epochs:.2f}'} | {_sci(s.compute)} | "
            f"{seeds[0] if seeds[0] == seeds[-1] else f'{seeds[0]}–{seeds[-1]}'} |"
        )
    return lines + [""]


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"
