"""The arms of a scaled comparison (`zoo.compare.scale`) and their sizes: runs grouped into arms
(the config minus the seed, KEY, the keys that change with KEY alone and, with tune=, KEY2), each
size measured (training compute C = 3 · F · D, the final metric over seeds, N, D, D/N, epochs) or,
with tune=, taken at its own best KEY2 with each seed measured at the value chosen on the others
(`zoo.compare.select`); and the record of an arm's compute multiplier at one size
(`zoo.compare.multipliers` computes it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from zoo.compare.errors import CompareError
from zoo.compare.joint import is_joint
from zoo.compare.joint import order as joint_order
from zoo.compare.patterns import arm_setting
from zoo.compare.powerlaw import PowerLaw
from zoo.compare.runs import IGNORED, NOT_SETTINGS, Run, epochs, training_compute
from zoo.compare.runs import number as _number
from zoo.compare.select import Choice, leave_one_seed_out
from zoo.compare.stats import mean_std
from zoo.compare.tune import _order
from zoo.compare.verdict import lower_is_better


def active_params(run: Run) -> float | None:
    """The non-embedding parameters one token passes through (model.ffn=moe: the router, top-k
    and shared experts), from the run's summary; a record without them (a dense model, or one
    written before they were counted) its non-embedding parameters."""
    active = _number(run, "model", "active_non_embedding_params")
    return active if active else _number(run, "model", "non_embedding_params")


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
    order = sorted(by_value, key=lambda v: joint_order(key, values[v]) if is_joint(key) else _order(values[v]))
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
        if k not in dropped
        and not k.startswith(NOT_SETTINGS)
        and len({repr(arm.runs[0].config.get(k)) for arm in arms}) > 1
    ]
    for arm in arms:
        arm.settings = {k: arm_setting(arm.runs[0].config, k) for k in keys}
    return arms, keys, linked
