"""`decisions.png` of a scaled comparison (`zoo.compare.transfer`): the decision accuracy of each
smaller size against the largest (the share of pairs of arms ordered alike, the bootstrap mean
with its 95% interval, and the fraction on the means), the agreement rate drawn across; beside
it, each arm's held-out-size prediction against the value measured there."""

from __future__ import annotations

from pathlib import Path

from zoo.compare.plots import _pyplot, _save
from zoo.compare.transfer import Decisions


def figure_decisions(found: Decisions):
    """The figure of the module docstring; None when there is neither an accuracy nor a prediction."""
    predictions = [p for p in found.predictions if p.predicted is not None and p.observed is not None]
    if not found.sizes and not predictions:
        return None
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    if found.sizes:
        xs = list(range(len(found.sizes)))
        means = [100 * s.mean for s in found.sizes]
        # a skewed bootstrap's mean can lie outside its percentile interval (most draws agree, a
        # few do not): the bar then starts at the mean
        below = [100 * max(s.mean - s.low, 0.0) for s in found.sizes]
        above = [100 * max(s.high - s.mean, 0.0) for s in found.sizes]
        left.errorbar(xs, means, yerr=[below, above], fmt="o-", capsize=3, label="bootstrap mean, 95% CI")
        left.plot(xs, [100 * s.accuracy for s in found.sizes], "x", color="k", label="on the means")
        left.axhline(100 * found.rate, color="grey", linestyle="--", linewidth=1, label=f"{100 * found.rate:.0f}%")
        left.set_xticks(xs, [str(s.size) for s in found.sizes])
        left.set_ylim(-5, 105)
        left.legend(fontsize=7, loc="lower right")
    else:
        left.text(0.5, 0.5, "no decision accuracy", ha="center", va="center", transform=left.transAxes)
    left.set_xlabel(found.key)
    left.set_ylabel(f"decisions as at {found.key}={found.largest} (%)")
    left.set_title("decision accuracy", fontsize=9)
    for i, p in enumerate(predictions):
        pred = p.predicted or 0.0
        has = p.low is not None and p.high is not None
        err = [[max(pred - (p.low or 0.0), 0.0)], [max((p.high or 0.0) - pred, 0.0)]] if has else None
        right.errorbar([i], [pred], yerr=err, fmt="o", capsize=3, color="C0", label="predicted" if i == 0 else None)
        right.plot([i], [p.observed], "x", color="k", label="observed" if i == 0 else None)
    right.set_xticks(list(range(len(predictions))), [p.arm for p in predictions])
    right.set_title("held-out size: the largest, from the others", fontsize=9)
    if predictions:
        right.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_decisions(found: Decisions, path: Path) -> Path | None:
    fig = figure_decisions(found)
    return None if fig is None else _save(_pyplot(), fig, path)
