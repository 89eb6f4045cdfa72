"""Loss against training compute as a power law (Kaplan et al. 2020; Hoffmann et al. 2022):

    L(C) = a · C^(-b)            (`fit_power_law`, at least MIN_POINTS compute values)
    L(C) = e + a · C^(-b)        (irreducible=True: at least MIN_POINTS_IRREDUCIBLE)

fitted by least squares on log L (a relative error, the same weight at every scale). The pure
form is a straight line in log-log coordinates, solved in closed form; the saturating one is
solved for each irreducible loss e by that line through log(L - e), e chosen by a grid over
[0, min L) and SciPy's bounded Brent search (`scipy.optimize.minimize_scalar`) between the grid
points beside the best. The line stays a closed form here rather than `scipy.stats.linregress`:
one saturating fit solves it about 250 times, and a seed bootstrap refits a thousand times.
`PowerLaw.compute_for(L)` inverts the curve: the compute at which it reaches a loss L (None when
L is at or below its irreducible loss).

A fit also says how well it fits: `rmse_log` (the root mean square residual of log L), and the
standard error of the exponent from those residuals, `se_b`, on `df` = n - (parameters)
degrees of freedom: se_b = sqrt(SSE / df / Sxx), Sxx the spread of log C (for e + a·C^-b, of the
line through log(L - e) at the fitted e). `exponent_interval` turns it into a t interval. With
3 points and 2 parameters df is 1 (t quantile 12.7): such a fit describes the points and does
not pin the exponent."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from zoo.compare.stats import t_quantile

MIN_POINTS = 3  # two parameters: two points fit any line exactly and say nothing about the fit
MIN_POINTS_IRREDUCIBLE = 5  # three parameters, two points to spare


class TooFewPoints(ValueError):
    """Not enough distinct compute values for the form asked for."""


_LOG_MAX = 700.0  # exp() of more overflows a float: such a compute is "never" here
_E_TOLERANCE = 1e-12  # the irreducible loss is searched to this fraction of the lowest loss


@dataclass(frozen=True)
class PowerLaw:
    a: float
    b: float  # the exponent: loss falls as C^-b
    e: float = 0.0  # the irreducible loss (0 for the pure form)
    rmse_log: float = 0.0  # root mean square residual of log L at the fitted points
    log_a: float | None = None  # log a, kept exact when a itself overflows
    se_b: float = 0.0  # standard error of b from the residuals (0: the points lie on the curve)
    df: int = 0  # residual degrees of freedom: points - parameters

    def __post_init__(self) -> None:
        if self.log_a is None:
            object.__setattr__(self, "log_a", math.log(self.a) if self.a > 0 else -math.inf)

    @property
    def log_scale(self) -> float:
        """log a: `log_a` as `__post_init__` set it, a float from then on."""
        if self.log_a is not None:
            return self.log_a
        return math.log(self.a) if self.a > 0 else -math.inf

    def loss_at(self, compute: float) -> float:
        return self.e + math.exp(min(self.log_scale - self.b * math.log(compute), _LOG_MAX))

    def compute_for(self, loss: float) -> float | None:
        """The compute at which the curve reaches `loss`; None when it never does (at or below
        its irreducible loss, a curve that does not fall, or beyond any float)."""
        if loss <= self.e or self.b <= 0 or not math.isfinite(self.log_scale):
            return None
        log_c = (self.log_scale - math.log(loss - self.e)) / self.b
        return math.exp(log_c) if log_c < _LOG_MAX else None

    def residual(self, compute: float, loss: float) -> float:
        """log(measured loss) - log(the curve's loss) at `compute`: > 0 means the point lies
        above the curve (about a relative error for small values)."""
        return math.log(loss) - math.log(self.loss_at(compute))

    def exponent_interval(self, level: float = 0.95) -> tuple[float, float] | None:
        """b ± t(level, df) · se_b, the interval the fit's own misfit allows; None without
        residual degrees of freedom."""
        if self.df < 1:
            return None
        half = t_quantile(1 - (1 - level) / 2, self.df) * self.se_b
        return self.b - half, self.b + half

    def __str__(self) -> str:
        head = f"{self.e:.4g} + " if self.e > 1e-9 else ""
        scale = f"{self.a:.4g}" if math.isfinite(self.a) else f"e^{self.log_a:.1f}"
        return f"L = {head}{scale} · C^{-self.b:.4f}"


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of ys on xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def _fit_given_e(log_c: list[float], losses: list[float], e: float) -> tuple[PowerLaw, float]:
    slope, intercept = _line(log_c, [math.log(L - e) for L in losses])
    law = PowerLaw(
        a=math.exp(min(intercept, _LOG_MAX)) if intercept < _LOG_MAX else math.inf, b=-slope, e=e, log_a=intercept
    )
    sse = sum((math.log(L) - math.log(law.loss_at(math.exp(x)))) ** 2 for x, L in zip(log_c, losses))
    return law, sse


def _finish(law: PowerLaw, log_c: list[float], losses: list[float], sse: float, parameters: int) -> PowerLaw:
    """`law` with its fit error, and the standard error of b from the residuals of its line."""
    n = len(losses)
    df = n - parameters
    line_sse = sum((math.log(L - law.e) - (law.log_scale - law.b * x)) ** 2 for x, L in zip(log_c, losses))
    mean = sum(log_c) / n
    sxx = sum((x - mean) ** 2 for x in log_c)
    se_b = math.sqrt(line_sse / df / sxx) if df > 0 and sxx > 0 else 0.0
    return PowerLaw(law.a, law.b, law.e, math.sqrt(sse / n), law.log_a, se_b=se_b, df=max(df, 0))


def fit_power_law(compute: Sequence[float], loss: Sequence[float], irreducible: bool = False) -> PowerLaw:
    """Fit L = a·C^-b (or e + a·C^-b) to points (compute, loss); `TooFewPoints` when there are
    fewer distinct compute values than the form needs, ValueError for a non-positive value."""
    if len(compute) != len(loss):
        raise ValueError(f"{len(compute)} compute values for {len(loss)} losses")
    if any(not (c > 0 and math.isfinite(c)) for c in compute) or any(not (L > 0 and math.isfinite(L)) for L in loss):
        raise ValueError("a power law needs positive, finite compute and loss values")
    need = MIN_POINTS_IRREDUCIBLE if irreducible else MIN_POINTS
    distinct = len(set(compute))
    if distinct < need:
        form = "e + a·C^-b" if irreducible else "a·C^-b"
        raise TooFewPoints(
            f"{distinct} compute value{'s' if distinct != 1 else ''}; fitting {form} needs at least {need}"
        )
    log_c, losses = [math.log(c) for c in compute], list(loss)
    if not irreducible:
        law, sse = _fit_given_e(log_c, losses, 0.0)
        return _finish(law, log_c, losses, sse, 2)
    from scipy.optimize import minimize_scalar

    top = min(losses) * (1 - 1e-9)
    grid = [top * i / 200 for i in range(200)]
    scores = [_fit_given_e(log_c, losses, e)[1] for e in grid]
    i = min(range(len(grid)), key=scores.__getitem__)
    low, high = grid[max(i - 1, 0)], grid[i + 1] if i + 1 < len(grid) else top
    best = minimize_scalar(
        lambda e: _fit_given_e(log_c, losses, e)[1],
        bounds=(low, high),
        method="bounded",
        options={"xatol": _E_TOLERANCE * top},
    )
    law, sse = _fit_given_e(log_c, losses, float(best.x))
    return _finish(law, log_c, losses, sse, 3)
