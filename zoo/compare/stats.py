"""Mean, spread and a 95% confidence interval for a difference of means, without SciPy.

The interval is Student's t: paired over seeds when both arms ran the same seeds (the
seed fixes initialisation and data order, so pairing removes that shared noise), Welch's
otherwise (Welch 1947). t quantiles come from integrating the t density numerically."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample standard deviation; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var)


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with `df` (> 0, not necessarily integer) degrees of freedom."""
    if x < 0:
        return 1.0 - t_cdf(-x, df)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def density(t: float) -> float:
        return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))

    # substitute t = tan(u): the integrand stays bounded for heavy tails; Simpson's rule
    upper, n = math.atan(x), 400
    h = upper / n
    total = 0.0
    for i in range(n + 1):
        u = i * h
        weight = 1 if i in (0, n) else (4 if i % 2 else 2)
        total += weight * density(math.tan(u)) / math.cos(u) ** 2
    return 0.5 + total * h / 3


def t_quantile(p: float, df: float) -> float:
    """x with P(T <= x) = p, for p in (0.5, 1), by bisection."""
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


@dataclass
class Difference:
    """arm - baseline: the mean difference and its 95% interval (None when undefined)."""

    mean: float
    low: Optional[float]
    high: Optional[float]
    method: str  # "paired", "welch" or why no interval

    def __str__(self) -> str:
        if self.low is None:
            return f"{self.mean:+.4f}"
        return f"{self.mean:+.4f} [{self.low:+.4f}, {self.high:+.4f}]"


def difference(arm: dict, baseline: dict, level: float = 0.95) -> Optional[Difference]:
    """Difference of means of two {seed: value} maps with a `level` confidence interval."""
    if not arm or not baseline:
        return None
    p = 1 - (1 - level) / 2
    shared = sorted(set(arm) & set(baseline), key=str)
    if len(shared) >= 2 and len(shared) == len(arm) == len(baseline):
        deltas = [arm[s] - baseline[s] for s in shared]
        mean, sd = mean_std(deltas)
        half = t_quantile(p, len(deltas) - 1) * sd / math.sqrt(len(deltas))
        return Difference(mean, mean - half, mean + half, "paired")
    a, b = list(arm.values()), list(baseline.values())
    mean = mean_std(a)[0] - mean_std(b)[0]
    if len(a) < 2 or len(b) < 2:
        return Difference(mean, None, None, "one seed: no interval")
    va, vb = mean_std(a)[1] ** 2 / len(a), mean_std(b)[1] ** 2 / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return Difference(mean, mean, mean, "welch")
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = t_quantile(p, df) * se
    return Difference(mean, mean - half, mean + half, "welch")
