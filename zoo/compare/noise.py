"""Noise beyond seeds: each run's spread over its last k validations beside the spread across
seeds, and, when a sweep varies both the init seed (`seed`) and the data-order seed
(`data.order_seed`), the seed variance split between them.

The seed spread of an arm is the standard deviation of its runs' final values. Signal and Noise
(Heineman et al. 2025) adds the noise within one run: the standard deviation of its last k
evaluations (k = `last_k=`, default 5), which a difference between arms must also clear, and
which averaging the weights (`optim.ema` with `optim.ema_eval`) lowers. A run that is still
learning moves over its last k validations by its trend as well, so the spread is taken about
the least-squares line through them (against the step: the trend removed, k − 2 degrees of
freedom); on a flat tail it is their standard deviation. Each run's last-k spread is read from its
metrics.csv (the validations that logged the report's metric; all of them when fewer than k, none
below 3) and kept in runs.csv (`last_k_sd`); an arm's is the root mean square over its runs (the
pooled spread of equally many points). Where the last k validations reach back into the first half
of a run (a run that validated only a few times), the line through them does not straighten the
curve's bend, and the spread measures that bend as much as the noise: each run's window start, as
a fraction of its last step, is kept in runs.csv (`last_k_from`) and such arms are marked.

The attribution is a two-way random-effects analysis of variance without replication (one run
per pair of seeds; Searle, Casella and McCulloch 1992, ch. 4): within an arm whose runs cross a
init seeds with b data-order seeds, one run each, the mean squares of the init seeds (MS_A, a − 1
degrees of freedom), the order seeds (MS_B, b − 1) and the residual (MS_E, (a − 1)(b − 1)) give
the variance components σ²_init = (MS_A − MS_E)/b, σ²_order = (MS_B − MS_E)/a and σ²_residual =
MS_E (their interaction and any other run-to-run noise); a negative estimate is set to 0 (the
usual truncation, said where it happens). An arm whose seeds do not cross completely is left out
and named."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zoo.compare.errors import CompareError
from zoo.compare.escape import text
from zoo.compare.runs import ORDER_SEED, Run, RunStatus
from zoo.compare.stats import mean_std
from zoo.compare.table import TAIL, TAIL_FROM
from zoo.config.records.reader import read_text
from zoo.config.records.rundir import RunDir

LAST_K = 5
MIN_POINTS = 3  # a spread about a line
EARLY = 0.5  # a window that starts before this fraction of the run holds its curve's bend


@dataclass(frozen=True)
class Tail:
    """A run's spread over its last k validations (`sd`) and where that window starts, as a
    fraction of the run's last validated step (`start`; None where not known)."""

    sd: float
    start: float | None = None

    @property
    def early(self) -> bool:
        return self.start is not None and self.start < EARLY


def parse_k(value: Any) -> int:
    """last_k=K: an integer of at least 3 (a spread about a line needs three points)."""
    try:
        k = int(str(value))
    except ValueError:
        raise CompareError(f"last_k={value}: give the number of last validations, an integer >= 3") from None
    if k < MIN_POINTS:
        raise CompareError(f"last_k={value}: a spread about the tail's trend needs at least {MIN_POINTS} validations")
    return k


def read_tail(run: Run, metric: str, k: int) -> list[tuple[float, float]]:
    """The last `k` (step, value) of `metric` in the run's metrics.csv, oldest first ([] without one)."""
    path = RunDir(run.path).metrics
    if not path.is_file():
        return []
    at: dict[float, float] = {}  # step -> value: a step validated twice counts once, its last value
    for row in csv.DictReader(io.StringIO(read_text(path), newline="")):
        cell = row.get(metric)
        if cell:
            try:
                value, step = float(cell), float(row.get("step") or len(at))
            except ValueError:
                continue  # a damaged cell: the run's reader (zoo.compare.runs.read_curve) names it
            if math.isfinite(value) and math.isfinite(step):
                at.pop(step, None)
                at[step] = value
    return list(at.items())[-k:]


def detrended_sd(points: Sequence[tuple[float, float]]) -> float:
    """The standard deviation of (x, y) `points` about their least-squares line (n − 2 degrees
    of freedom); at least 3 points with 2 distinct x."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in points)
    return math.sqrt(residual / (n - 2))


def window_start(points: Sequence[tuple[float, float]]) -> float | None:
    """Where (step, value) `points` start, as a fraction of their last step (None: no step > 0)."""
    last = points[-1][0]
    return points[0][0] / last if last > 0 else None


def tail_sd(run: Run, metric: str, k: int, *, files: bool = True) -> Tail | None:
    """A finished run's spread over its last `k` validations of `metric`, about their trend
    (`detrended_sd`), and where they start: runs.csv's where the run was rebuilt from it, else its
    metrics.csv's; None with fewer than MIN_POINTS points. `files` False: a run rebuilt from
    runs.csv, whose path names no directory here (runs.csv's values or nothing)."""
    if run.status != RunStatus.finished:
        return None
    if run.tail_sd is not None or not files:
        return None if run.tail_sd is None else Tail(run.tail_sd, run.tail_from)
    points = read_tail(run, metric, k)
    return Tail(detrended_sd(points), window_start(points)) if len(points) >= MIN_POINTS else None


@dataclass
class ArmNoise:
    """One arm's seed spread and last-k spread."""

    name: str
    seeds: int
    seed_sd: float | None
    tail_sd: float | None  # root mean square of its runs' last-k spreads
    tails: int  # runs with a last-k spread
    early: int = 0  # of them, runs whose last k validations start in the first half of the run


def arm_noise(name: str, runs: Sequence[Run], metric: str, tails: dict[Any, Tail]) -> ArmNoise:
    """`tails`: {run path: its last-k spread}."""
    finals = [v for v in (r.final(metric) for r in runs) if v is not None]
    seed_sd = mean_std(finals)[1] if len(finals) >= 2 else None
    mine = [tails[r.path] for r in runs if r.path in tails]
    rms = math.sqrt(sum(t.sd * t.sd for t in mine) / len(mine)) if mine else None
    return ArmNoise(name, len(finals), seed_sd, rms, len(mine), sum(t.early for t in mine))


@dataclass
class Attribution:
    """An arm's variance components over a complete crossing of init and data-order seeds."""

    name: str
    a: int  # init seeds
    b: int  # data-order seeds
    ms_init: float
    ms_order: float
    ms_resid: float
    init: float  # σ² estimates, truncated at 0
    order: float
    resid: float
    truncated: tuple[str, ...] = ()

    def share(self, part: float) -> float:
        total = self.init + self.order + self.resid
        return part / total if total > 0 else float("nan")


def order_of(run: Run) -> Any:
    """The run's data-order seed: data.order_seed, or its seed when that is unset."""
    order = run.config.get(ORDER_SEED)
    return run.config.get("seed") if order is None else order


def attribute(name: str, runs: Sequence[Run], metric: str) -> Attribution | str | None:
    """The two-way split of an arm's finished runs (None when no run's data order has a seed of
    its own, or its runs vary one seed only; a sentence when both vary but do not cross
    completely, one run per pair)."""
    if all(order_of(r) == r.config.get("seed") for r in runs):
        return None  # the data order follows the seed: one seed varies, nothing to split
    cells: dict[tuple[Any, Any], float] = {}
    for run in runs:
        value = run.final(metric)
        if value is not None:
            cells.setdefault((run.config.get("seed"), order_of(run)), value)
    inits = sorted({i for i, _ in cells}, key=str)
    orders = sorted({j for _, j in cells}, key=str)
    if len(inits) < 2 or len(orders) < 2:
        return None
    a, b = len(inits), len(orders)
    if len(cells) != a * b:
        return f"{name}: {len(cells)} runs over {a} init seeds and {b} data-order seeds do not cross completely"
    y = [[cells[(i, j)] for j in orders] for i in inits]
    grand = sum(map(sum, y)) / (a * b)
    rows = [sum(r) / b for r in y]
    cols = [sum(y[i][j] for i in range(a)) / a for j in range(b)]
    ss_a = b * sum((m - grand) ** 2 for m in rows)
    ss_b = a * sum((m - grand) ** 2 for m in cols)
    ss_e = sum((y[i][j] - rows[i] - cols[j] + grand) ** 2 for i in range(a) for j in range(b))
    ms_a, ms_b, ms_e = ss_a / (a - 1), ss_b / (b - 1), ss_e / ((a - 1) * (b - 1))
    init, order = (ms_a - ms_e) / b, (ms_b - ms_e) / a
    truncated = tuple(n for n, v in (("init", init), ("data order", order)) if v < 0)
    return Attribution(name, a, b, ms_a, ms_b, ms_e, max(init, 0.0), max(order, 0.0), ms_e, truncated)


def lines(noise: list[ArmNoise], k: int, parts: list[Attribution | str], metric: str, note: str = "") -> list[str]:
    """The report's "Noise beyond seeds" section (empty when no run has a last-k spread and no arm
    varies both seeds); `note`: a sentence after its description, saying which runs an arm's are
    where not all of them."""
    out: list[str] = []
    metric = text(metric)
    if any(n.tails for n in noise):
        out += [
            "",
            "## Noise beyond seeds",
            "",
            f"Seed spread: the standard deviation of an arm's final {metric} across its seeds. Last-{k} spread: "
            f"each run's spread over its last {k} validations of {metric} (Heineman et al. 2025's noise; fewer "
            f"points where a run validated fewer times), about the least-squares line through them against the "
            f"step (the trend a run still had removed; {k} − 2 degrees of freedom), pooled over the arm's runs "
            f"(root mean square); each run's is in runs.csv ({TAIL}). A difference between arms smaller than "
            f"the last-{k} spread is within what one run's evaluation moves by; averaging the weights "
            f"(optim.ema, optim.ema_eval) lowers it." + (f" {note}" if note else ""),
            "",
            f"| arm | seeds | seed spread | last-{k} spread (runs) |",
            "|---|---|---|---|",
        ]
        for n in noise:
            seed = "–" if n.seed_sd is None else f"{n.seed_sd:.4f}"
            tail = "–" if n.tail_sd is None else f"{n.tail_sd:.4f} ({n.tails})" + ("†" if n.early else "")
            out.append(f"| {text(n.name)} | {n.seeds} | {seed} | {tail} |")
        if any(n.early for n in noise):
            out += [
                "",
                f"† The last {k} validations of some of the arm's runs start in the first half of the run (a run "
                f"that validated only a few times): a straight line does not take out the curve's bend there, "
                f"so this spread holds the bend as well as what one evaluation moves by, and is not a measure "
                f"of noise. Validate more often (trainer.val_check_interval) to measure it; runs.csv gives each "
                f"run's window start as a fraction of its last step ({TAIL_FROM}).",
            ]
    if parts:
        out += [
            "",
            "## Variance: initialisation and data order",
            "",
            "Within each arm whose runs cross init seeds (seed) with data-order seeds (data.order_seed), one run "
            "each: a two-way random-effects analysis of variance without replication. σ²_init = (MS_init − "
            "MS_resid)/b and σ²_order = (MS_order − MS_resid)/a, a init and b data-order seeds; σ²_resid = "
            "MS_resid holds their interaction and any other run-to-run noise; a negative estimate is set to 0 "
            "(marked *). Shares are of the three components' sum. The seeds above name such a run SEED/ORDER "
            "where its two seeds differ." + (f" {note}" if note and not any(n.tails for n in noise) else ""),
            "",
            "| arm | init × order seeds | MS init | MS order | MS resid | σ² init (share) | σ² order (share) "
            "| σ² resid (share) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for part in parts:
            if isinstance(part, str):
                continue
            cells = []
            for label, value in (("init", part.init), ("data order", part.order), ("resid", part.resid)):
                mark = "*" if label in part.truncated else ""
                cells.append(f"{value:.3g}{mark} ({100 * part.share(value):.0f}%)")
            out.append(
                f"| {text(part.name)} | {part.a} × {part.b} | {part.ms_init:.3g} | {part.ms_order:.3g} | "
                f"{part.ms_resid:.3g} | " + " | ".join(cells) + " |"
            )
        out += [f"- {text(part)}: left out" for part in parts if isinstance(part, str)]
    return out
