"""Do decisions made at small sizes hold at the largest (`zoo-compare SWEEP scale=KEY`)? The
decision accuracy of each smaller size, the rank correlation of the arms per size, the smallest
size that agrees with the largest at a stated rate, and the held-out-size check.

The sizes compared are those at which every arm has a result; the largest of them is the
reference. A decision is the ordering of two arms by their mean final metric over seeds.

- **Decision accuracy** of a pair at a size: how often its ordering there matches its ordering at
  the largest size, over RESAMPLES bootstrap draws of the seeds (resampled with replacement
  within each arm × size, the largest size's too, so the reference's own noise counts; a tie
  counts one half). Of a size: the fraction of all pairs that agree, measured on the seeds'
  means, with the 95% percentile interval of that fraction over the draws (DataDecide,
  Magnusson et al. 2025, measures the same fraction against its largest scale).
  Beside each pair, whether its difference at the largest size is resolved (its 95% Student-t
  interval, paired as a report pairs, excludes 0): an unresolved reference ordering is itself
  noise, and no smaller size can be scored against it better than chance.
- **Rank correlation**: Spearman's ρ of the arms' means at a size against the largest (3 or more
  arms), with the 95% percentile interval over the same draws.
- **Smallest size that agrees**: the smallest size from which on every smaller size's bootstrap
  accuracy is at least the rate (`agree=`, default 80%).
- **Held-out-size check**: each arm's curve fitted on its sizes but its largest predicts the
  metric at the largest size's compute. The form is the report's (e + a·C^-b) where the sizes
  left allow it, else a · C^-b from 3 sizes (least squares on log L, `zoo.compare.powerlaw`),
  else with 2 sizes the same form through both points (a straight line in log-log, no residual
  degree of freedom). Its 95% interval is the percentile interval of the prediction over
  RESAMPLES draws of the seeds within each fitted size, refitted; it holds the seeds' noise
  only, not the doubt about the form, so an observed value outside it says the curve bends.

The draws come from one seeded generator: a report rebuilt from its runs.csv draws them again.
A cell with one seed stays fixed in every draw (and is said); `decide(strict=True)` refuses it."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from zoo.compare.errors import CompareError
from zoo.compare.escape import csv_cell
from zoo.compare.multipliers import LEVEL, _percentiles
from zoo.compare.powerlaw import MIN_POINTS, MIN_POINTS_IRREDUCIBLE, PowerLaw, fit_power_law
from zoo.compare.scaled_arms import ScaledArm, Size
from zoo.compare.stats import difference
from zoo.compare.tune import _order
from zoo.config.records.atomic import replacing

DECISIONS = "decisions.csv"
EXTRAPOLATION = "extrapolation.csv"
RESAMPLES = 1000
AGREE = 0.8  # the default rate at which a size's decisions "agree" with the largest's
SEED = 0


@dataclass
class PairDecision:
    """One pair of arms at one smaller size."""

    size: Any
    first: str
    second: str
    observed: float  # 1: the means order the pair as at the largest size, 0: the other way, 0.5: a tie
    rate: float  # the fraction of bootstrap draws whose ordering matches the largest size's
    resolved: bool | None = None  # at the largest size, the pair's 95% t interval excludes 0 (None: no interval)


@dataclass
class SizeDecision:
    """Every pair of arms at one smaller size."""

    size: Any
    pairs: int
    arms: int
    accuracy: float  # the fraction of pairs ordered as at the largest size, on the means
    mean: float  # its mean over the bootstrap draws
    low: float
    high: float
    spearman: float | None = None  # of the arms' means against the largest size's (3 or more arms)
    spearman_low: float | None = None
    spearman_high: float | None = None


@dataclass
class Prediction:
    """One arm's metric at its largest size, predicted from its other sizes."""

    arm: str
    size: Any  # the size held out
    form: str  # the fitted form, and from how many sizes
    fitted: int  # sizes fitted
    predicted: float | None
    low: float | None = None
    high: float | None = None
    observed: float | None = None
    note: str = ""  # why there is no prediction or no interval

    @property
    def inside(self) -> bool | None:
        if self.low is None or self.high is None or self.observed is None:
            return None
        return self.low <= self.observed <= self.high

    @property
    def error(self) -> float | None:
        """observed / predicted − 1."""
        if self.predicted is None or self.observed is None:
            return None
        return self.observed / self.predicted - 1


@dataclass
class Decisions:
    key: str
    rate: float  # agree=
    largest: Any = None
    sizes: list[SizeDecision] = field(default_factory=list)
    pairs: list[PairDecision] = field(default_factory=list)
    predictions: list[Prediction] = field(default_factory=list)
    smallest: Any = None  # the smallest size from which on the accuracy reaches `rate`
    note: str = ""  # why there is no decision accuracy
    fixed: list[str] = field(default_factory=list)  # arm × size cells with one seed (fixed in draws)

    def rows(self) -> list[dict]:
        """decisions.csv: one row per smaller size for all pairs, then one per pair and size."""
        out: list[dict] = []
        for s in self.sizes:
            out.append(
                {
                    self.key: s.size,
                    "largest": self.largest,
                    "pair": f"all {s.pairs} pairs",
                    "accuracy": s.accuracy,
                    "bootstrap": s.mean,
                    "low": s.low,
                    "high": s.high,
                    "spearman": s.spearman,
                    "spearman_low": s.spearman_low,
                    "spearman_high": s.spearman_high,
                    "agree": self.rate,
                    "agrees": s.mean >= self.rate,
                    "resolved_at_largest": None,
                }
            )
        for p in self.pairs:
            out.append(
                {
                    self.key: p.size,
                    "largest": self.largest,
                    "pair": f"{p.first} vs {p.second}",
                    "accuracy": p.observed,
                    "bootstrap": p.rate,
                    "low": None,
                    "high": None,
                    "spearman": None,
                    "spearman_low": None,
                    "spearman_high": None,
                    "agree": self.rate,
                    "agrees": p.rate >= self.rate,
                    "resolved_at_largest": p.resolved,
                }
            )
        return out

    def prediction_rows(self) -> list[dict]:
        """extrapolation.csv: one row per arm."""
        return [
            {
                "arm": p.arm,
                self.key: p.size,
                "form": p.form,
                "sizes_fitted": p.fitted,
                "predicted": p.predicted,
                "low": p.low,
                "high": p.high,
                "observed": p.observed,
                "error": p.error,
                "inside": p.inside,
                "note": p.note,
            }
            for p in self.predictions
        ]


def _common(arms: list[ScaledArm]) -> list[tuple[Any, list[Size]]]:
    """(size, each arm's Size there) for the sizes every arm has a result at, smallest first."""
    found: dict[str, tuple[Any, list[Size]]] = {}
    for i, arm in enumerate(arms):
        for s in arm.scored:
            if i == 0:
                found[repr(s.value)] = (s.value, [s])
            elif repr(s.value) in found and len(found[repr(s.value)][1]) == i:
                found[repr(s.value)][1].append(s)
    return sorted(((v, c) for v, c in found.values() if len(c) == len(arms)), key=lambda vc: _order(vc[0]))


def _draws(rng: np.random.Generator, finals: list[float], resamples: int) -> np.ndarray:
    """`resamples` means of `finals` resampled with replacement (a single value: itself)."""
    values = np.asarray(finals, dtype=float)
    if len(values) < 2:
        return np.full(resamples, values.mean())
    return values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)


def _agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1 where the signs of a and b agree (both nonzero), 0.5 where either is a tie, 0 otherwise."""
    sa, sb = np.sign(a), np.sign(b)
    return np.where((sa == 0) | (sb == 0), 0.5, (sa == sb).astype(float))


def _spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row of x against the same row of y (NaN where a row's ranks are all equal)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(axis=-1, keepdims=True), ry - ry.mean(axis=-1, keepdims=True)
    num = (rx * ry).sum(axis=-1)
    den = np.sqrt((rx**2).sum(axis=-1) * (ry**2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def decide(
    arms: list[ScaledArm],
    key: str,
    *,
    irreducible: bool = False,
    rate: float = AGREE,
    strict: bool = False,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Decisions:
    """The decision accuracy of every smaller size against the largest and the held-out-size
    check (the module docstring). `strict`: refuse (CompareError, one line) what the bootstrap
    cannot do (one size, a cell with fewer than 2 seeds) instead of saying it in `note`."""
    if not 0 < rate <= 1:
        raise CompareError(f"agree={rate}: give the rate as a fraction in (0, 1], e.g. agree=0.8")
    out = Decisions(key=key, rate=rate)
    rng = np.random.default_rng(seed)
    out.predictions = [_predict(arm, key, irreducible, rng, resamples) for arm in arms]
    common = _common(arms)
    why = ""
    if len(arms) < 2:
        why = "one arm: there is no decision to compare"
    elif len(common) < 2:
        shown = f" ({key}={common[0][0]})" if common else ""
        why = f"every arm has a result at {len(common)} common size{'s' if len(common) != 1 else ''}{shown}: decisions across sizes need 2 or more"
    if why:
        if strict:
            raise CompareError(f"scale={key}: {why}")
        out.note = why
        return out
    for value, cells in common:
        for arm, s in zip(arms, cells):
            if len(s.finals) < 2:
                out.fixed.append(f"{arm.name} at {key}={value}")
                if strict:
                    raise CompareError(
                        f"scale={key}: {arm.name} at {key}={value} has {len(s.finals)} seed with a result: a "
                        f"bootstrap over seeds needs 2 or more at every size (run more seeds, e.g. seed=0,1,2)"
                    )
    means = np.array([[s.result[1] for s in cells] for _, cells in common])  # (sizes, arms)
    draws = np.stack([np.stack([_draws(rng, s.finals, resamples) for s in cells], axis=-1) for _, cells in common])
    # draws: (sizes, resamples, arms)
    pairs = list(combinations(range(len(arms)), 2))
    out.largest = common[-1][0]
    for k, (value, _) in enumerate(common[:-1]):
        agree_draws = np.zeros(resamples)
        observed = 0.0
        for i, j in pairs:
            seen = float(_agreement(means[k, i] - means[k, j], means[-1, i] - means[-1, j]))
            drawn = _agreement(draws[k, :, i] - draws[k, :, j], draws[-1, :, i] - draws[-1, :, j])
            observed += seen
            agree_draws += drawn
            reference = difference(common[-1][1][i].seed_values(), common[-1][1][j].seed_values())
            resolved = None
            if reference is not None and reference.low is not None and reference.high is not None:
                resolved = not reference.low <= 0 <= reference.high
            out.pairs.append(PairDecision(value, arms[i].name, arms[j].name, seen, float(drawn.mean()), resolved))
        agree_draws /= len(pairs)
        low, high = _percentiles(list(agree_draws), LEVEL)
        decision = SizeDecision(
            value, len(pairs), len(arms), observed / len(pairs), float(agree_draws.mean()), low, high
        )
        if len(arms) >= 3:
            decision.spearman = float(_spearman(means[k], means[-1]))
            rho = _spearman(draws[k], draws[-1])
            rho = rho[~np.isnan(rho)]
            if len(rho):
                decision.spearman_low, decision.spearman_high = _percentiles(list(rho), LEVEL)
        out.sizes.append(decision)
    for done in reversed(out.sizes):
        if done.mean < rate:
            break
        out.smallest = done.size
    return out


def _two_point(compute: list[float], losses: list[float]) -> PowerLaw:
    """a · C^-b through two points: the straight line of log L against log C."""
    (c1, c2), (l1, l2) = compute, losses
    if c1 == c2:
        raise ValueError("two sizes at the same compute")
    b = -(math.log(l2) - math.log(l1)) / (math.log(c2) - math.log(c1))
    log_a = math.log(l1) + b * math.log(c1)
    return PowerLaw(a=math.exp(log_a) if log_a < 700 else math.inf, b=b, log_a=log_a)


def _predict(arm: ScaledArm, key: str, irreducible: bool, rng: np.random.Generator, resamples: int) -> Prediction:
    """The arm's largest size predicted from its other sizes, with a seed-bootstrap interval."""
    scored = sorted(arm.scored, key=lambda s: _order(s.value))
    if len(scored) < 3:
        return Prediction(
            arm.name,
            scored[-1].value if scored else None,
            "–",
            max(len(scored) - 1, 0),
            None,
            note=f"{len(scored)} size{'s' if len(scored) != 1 else ''} with a result: holding one out needs 3 or more",
        )
    held, fitted = scored[-1], scored[:-1]
    compute = [s.result[0] for s in fitted]
    if irreducible and len(fitted) >= MIN_POINTS_IRREDUCIBLE:
        form = f"e + a·C^-b on {len(fitted)} sizes"

        def fit(losses: list[float]) -> PowerLaw:
            return fit_power_law(compute, losses, irreducible=True)
    elif len(fitted) >= MIN_POINTS:
        form = f"a·C^-b on {len(fitted)} sizes"

        def fit(losses: list[float]) -> PowerLaw:
            return fit_power_law(compute, losses)
    else:
        form = "a·C^-b through 2 sizes"

        def fit(losses: list[float]) -> PowerLaw:
            return _two_point(compute, losses)

    target = held.result[0]
    out = Prediction(arm.name, held.value, form, len(fitted), None, observed=held.result[1])
    try:
        out.predicted = fit([s.result[1] for s in fitted]).loss_at(target)
    except ValueError as exc:
        out.note = f"no fit: {exc}"
        return out
    if all(len(s.finals) < 2 for s in fitted):
        out.note = "one seed at every fitted size: no interval"
        return out
    draws = np.stack([_draws(rng, s.finals, resamples) for s in fitted], axis=-1)  # (resamples, sizes)
    predicted = []
    for row in draws:
        try:
            predicted.append(fit([float(v) for v in row]).loss_at(target))
        except ValueError:  # a draw the form cannot take: left out
            continue
    if predicted:
        out.low, out.high = _percentiles(predicted, LEVEL)
    if any(len(s.finals) < 2 for s in fitted):
        out.note = "a fitted size with one seed stays fixed in the draws"
    return out


def write_decisions(found: Decisions, out: Path) -> dict[str, Path]:
    """decisions.csv (`Decisions.rows`) and extrapolation.csv (`Decisions.prediction_rows`) in `out`."""
    written = {}
    for name, rows, empty in (
        (DECISIONS, found.rows(), [found.key, "largest", "pair", "accuracy", "bootstrap", "low", "high"]),
        (EXTRAPOLATION, found.prediction_rows(), ["arm", found.key, "form", "predicted", "low", "high", "observed"]),
    ):
        head = list(rows[0]) if rows else empty
        with replacing(out / name) as handle:
            writer = csv.DictWriter(handle, fieldnames=head)
            writer.writerow({k: csv_cell(k) for k in head})
            writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
        written[name.removesuffix(".csv") + "_csv"] = out / name
    return written
