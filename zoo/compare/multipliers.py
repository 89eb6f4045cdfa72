"""The statistics of a scaled comparison (`zoo.compare.scale`, whose docstring gives the
formulas): each arm's power law with its residuals and the 95% interval of its exponent (the wider
of a seed bootstrap and the fit's misfit), and each arm's compute multiplier against the baseline
at its sizes with an interval from two 97.5% intervals together, adjusted as one Bonferroni
family."""

from __future__ import annotations

import math
import random

from zoo.compare.powerlaw import PowerLaw, TooFewPoints, fit_power_law
from zoo.compare.scaled_arms import Multiplier, ScaledArm, Size
from zoo.compare.stats import difference

BOOTSTRAP = 1000  # resamples of the seeds
LEVEL = 0.95


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
