"""The comparison's figures, drawn for a reviewer: every error bar and band is the 95%
Student-t interval of a mean over seeds (said in the legend), every axis names its unit (nats
per token for a loss, bits per byte, tokens, FLOPs), final values are dots on an axis that
encodes no length (no bar starting at an arbitrary value), log axes carry plain tick labels and
one axis label, arms are named by the setting they change, series that share an x are offset
and marked differently so none hides another, and legends sit outside the data.

Each figure is built by a `figure_*` function (returns the matplotlib figure, which the tests
read) and written by its `plot_*` function. Matplotlib's Agg backend: files only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from zoo.compare.stats import mean_std, t_quantile
from zoo.compare.verdict import named_settings, with_unit
from zoo.config.records.atomic import replacing

LEVEL = 0.95
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
INTERVAL = "bars: 95% Student-t interval of the mean over seeds"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def half_width(std: float | None, n: int, level: float = LEVEL) -> float:
    """Half the `level` Student-t interval of a mean of `n` values with sample deviation `std`
    (0 for fewer than 2 values or no spread: no interval to draw)."""
    if n < 2 or not std:
        return 0.0
    return t_quantile(1 - (1 - level) / 2, n - 1) * std / math.sqrt(n)


def _save(plt, fig, path: Path) -> Path:
    """Write `path` with the legends outside the axes kept in the image, and free the figure."""
    with replacing(path, binary=True) as handle:
        fig.savefig(handle, dpi=120, format=Path(path).suffix.lstrip(".") or "png", bbox_inches="tight")
    plt.close(fig)
    return path


def name(report, arm) -> str:
    """An arm named by the settings it changes ("norm=post"; none its feed-forward kind does not
    read), "(baseline)" on the baseline."""
    settings = ", ".join(f"{k.removeprefix('model.')}={v}" for k, v in named_settings(arm).items())
    label = settings or arm.name
    return label + (" (baseline)" if arm is report.baseline else "")


def _legend_outside(ax, title: str | None = None) -> None:
    ax.legend(
        loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, title=title, title_fontsize=7
    )


def _tick(value: float) -> str:
    """A plain tick label: 0.003, 70, 2048, 1e15 (never 7×10¹)."""
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return str(int(value)) if float(value).is_integer() else f"{value:.3g}"
    mantissa, exponent = f"{value:.1e}".split("e")  # 3.0e-04 (format g writes 0.0003 down to 1e-4)
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values (1, 2, 5 × 10^k) inside [low, high] for a log axis, at most `count` of them;
    else `count` evenly spaced values rounded to 2 significant digits."""
    if low <= 0 or high <= low:
        return [low, high] if high > low else [low]
    nice = [
        m * 10.0**k for k in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1) for m in (1, 2, 5)
    ]
    inside = [v for v in nice if low <= v <= high]
    if len(inside) >= 2:
        step = math.ceil(len(inside) / count)
        return inside[::step]
    return sorted({float(f"{v:.2g}") for v in np.geomspace(low, high, count - 1)})


def _log_axis(ax, which: str, low: float, high: float, ticks: Sequence[float] | None = None) -> None:
    """A log axis with plain labels at `ticks` (default: round values over [low, high]) and no
    labels on its minor ticks."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(FixedLocator(list(ticks) if ticks is not None else _nice_ticks(low, high)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: _tick(v)))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def _offsets(count: int, width: float) -> list[float]:
    """Multiplicative x offsets (on a log axis) spreading `count` series over `width` decades."""
    if count <= 1:
        return [1.0]
    return [10 ** (width * (i / (count - 1) - 0.5)) for i in range(count)]


def figure_curves(report):
    """Validation loss against tokens seen: each arm's mean over seeds, its band the 95% t
    interval of that mean (arms with one seed: the line alone)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, arm in enumerate(report.arms):
        curves = [r.curve for r in arm.runs if r.curve]
        if not curves:
            continue
        # points every seed has (an unfinished run stops early; a preempted one validates once more)
        by_tokens = [dict(c) for c in curves]
        tokens = np.array(sorted(set.intersection(*(set(d) for d in by_tokens))))
        if not len(tokens):
            continue
        losses = np.array([[d[t] for t in tokens] for d in by_tokens])  # (seeds, points)
        mean = losses.mean(0)
        (line,) = ax.plot(tokens, mean, label=name(report, arm), marker=MARKERS[i % len(MARKERS)], markersize=3)
        if len(curves) > 1:
            half = np.array([half_width(mean_std(list(col))[1], len(col)) for col in losses.T])
            ax.fill_between(tokens, mean - half, mean + half, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("training tokens seen (tokens)")
    ax.set_ylabel(with_unit("val/loss"))
    ax.set_title("validation loss: mean over seeds; band: 95% Student-t interval of the mean", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        _legend_outside(ax)
    return fig


def plot_curves(report, path: Path) -> Path:
    return _save(_pyplot(), figure_curves(report), path)


def figure_final(report):
    """The final metric per arm as a dot plot: the mean over seeds with its 95% t interval, each
    seed's value beside it, and the baseline's mean as a dashed line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.45 * len(report.arms)))
    labels: list[str] = []
    span: list[float] = []
    for y, arm in enumerate(report.arms):
        finals = list(arm.finals(report.metric).values())
        labels.append(name(report, arm) + ("" if finals else " (no finished run)"))
        if not finals:
            continue
        mean, std = mean_std(finals)
        half = half_width(std, len(finals))
        ax.scatter(
            finals,
            [y + 0.18] * len(finals),
            s=12,
            facecolors="none",
            edgecolors="tab:gray",
            linewidths=0.8,
            label="one seed" if not span else None,
            zorder=2,
        )
        ax.errorbar(
            [mean],
            [y],
            xerr=[half],
            fmt="o",
            color="black" if arm is report.baseline else "tab:blue",
            capsize=3,
            label="mean, bars: 95% Student-t interval" if not span else None,
            zorder=3,
        )
        span += [*finals, mean - half, mean + half]
        if arm is report.baseline:
            ax.axvline(mean, color="black", linestyle="--", linewidth=0.8, label="baseline mean", zorder=1)
    ax.set_yticks(np.arange(len(labels)), labels, fontsize=7)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    if span:
        low, high = min(span), max(span)
        pad = 0.1 * (high - low) or 0.05 * max(abs(high), 1e-9)
        ax.set_xlim(low - pad, high + pad)
    ax.set_xlabel(f"final {with_unit(report.metric)}")
    ax.set_title("dots: mean over seeds; circles: each seed", fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    if ax.get_legend_handles_labels()[0]:
        _legend_outside(ax)
    return fig


def plot_final(report, path: Path) -> Path:
    return _save(_pyplot(), figure_final(report), path)


def figure_lengths(report):
    """Perplexity against evaluation length per arm, log-log with plain ticks at the lengths
    measured; arms past their learned table stop where it ends (square markers)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    rows = [row for row in report.lengths if any(isinstance(c, tuple) for c in row["cells"].values())]
    shifts = _offsets(len(rows), 0.03)
    xs_all: list[float] = []
    ys_all: list[float] = []
    for i, row in enumerate(rows):
        points = [
            (row["trained"] * m if row["trained"] else m, cell[0], half_width(cell[1], cell[2]))
            for m, cell in row["cells"].items()
            if isinstance(cell, tuple)
        ]
        x, y, err = zip(*points)
        stops = any(not isinstance(cell, tuple) for cell in row["cells"].values())
        rule = f" + {row['rule']}" if row.get("rule") else ""
        label = name(report, row["arm"]) + rule + (f" (none past {max(x)})" if stops else "")
        ax.errorbar(
            [v * shifts[i] for v in x],
            y,
            yerr=err,
            marker=MARKERS[i % len(MARKERS)],
            markersize=4,
            capsize=2,
            label=label,
        )
        xs_all += x
        ys_all += [v - e for v, e in zip(y, err)] + [v + e for v, e in zip(y, err)]
    if xs_all:
        _log_axis(ax, "x", min(xs_all), max(xs_all), ticks=sorted(set(xs_all)))
        _log_axis(ax, "y", max(min(ys_all), 1e-9), max(ys_all))
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("validation perplexity (per token)")
    ax.set_title("perplexity by evaluation length: mean over seeds", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        _legend_outside(ax, title=INTERVAL)
    return fig


def plot_lengths(report, path: Path) -> Path:
    return _save(_pyplot(), figure_lengths(report), path)


def figure_tuning(report):
    """Final metric (mean over seeds, 95% t interval) against the tuned key, one line per arm,
    its best value ringed; a log axis labelled at the values tried when every value is a
    positive number (learning rates), the arms offset along it so none hides another."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    numeric = all(
        isinstance(p.value, (int, float)) and not isinstance(p.value, bool) and p.value > 0
        for arm in report.arms
        for p in arm.points
    )
    shifts = _offsets(len(report.arms), 0.04) if numeric else [0.0] * len(report.arms)
    categories = list(dict.fromkeys(str(p.value) for arm in report.arms for p in arm.points))
    tried = []
    for i, arm in enumerate(report.arms):
        points = [p for p in arm.points if p.mean is not None]
        if not points:
            continue

        spread = 0.06 * (i - (len(report.arms) - 1) / 2)  # arms side by side at a category

        def place(value, shift=shifts[i], offset=spread):
            if numeric:
                return value * shift
            return categories.index(str(value)) + offset

        tried += [p.value for p in points]
        line = ax.errorbar(
            [place(p.value) for p in points],
            [p.mean for p in points],
            yerr=[half_width(p.std, p.seeds) for p in points],
            marker=MARKERS[i % len(MARKERS)],
            markersize=4,
            capsize=3,
            label=name(report, arm),
        )
        if arm.best is not None:
            ax.scatter(
                [place(arm.best.value)],
                [arm.best.mean],
                s=160,
                facecolors="none",
                edgecolors=line[0].get_color(),
                linewidths=1.5,
            )
    if numeric and tried:
        _log_axis(ax, "x", min(tried), max(tried), ticks=sorted(set(tried)))
    elif categories:
        ax.set_xticks(range(len(categories)), categories)
    ax.set_xlabel(f"{report.key} (values tried)")
    ax.set_ylabel(f"final {with_unit(report.metric)}")
    ax.set_title(f"each arm at its own best {report.key} (ringed): mean over seeds", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        _legend_outside(ax, title=INTERVAL)
    return fig


def plot_tuning(report, path: Path) -> Path:
    return _save(_pyplot(), figure_tuning(report), path)


def figure_scaling(report):
    """Final metric against training compute, log-log with plain ticks: each arm's sizes (mean
    over seeds, 95% t interval; labelled with the size) and its fitted power law, drawn over the
    compute its own sizes span and no further (the report extrapolates no fit), one colour and
    marker per arm."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    computes = [s.compute for arm in report.arms for s in arm.scored]
    shifts = _offsets(len(report.arms), 0.02)
    ys = []
    for i, arm in enumerate(report.arms):
        sizes = arm.scored
        if not sizes:
            continue
        err = [half_width(s.std, len(s.finals)) for s in sizes]
        line = ax.errorbar(
            [s.compute * shifts[i] for s in sizes],
            [s.mean for s in sizes],
            yerr=err,
            marker=MARKERS[i % len(MARKERS)],
            linestyle="none",
            capsize=3,
            label=name(report, arm),
        )
        ys += [s.mean - e for s, e in zip(sizes, err)] + [s.mean + e for s, e in zip(sizes, err)]
        if arm.fit is not None:
            own = [s.compute for s in sizes]
            xs = np.geomspace(min(own), max(own), 100)
            fitted = [arm.fit.loss_at(x) for x in xs]
            ys += fitted
            ax.plot(
                xs,
                fitted,
                color=line[0].get_color(),
                linewidth=1.2,
                label=f"fit, {name(report, arm)}: b = {arm.fit.b:.3f}",
            )
        for s in sizes:
            ax.annotate(
                f"{s.value}",
                (s.compute * shifts[i], s.mean),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color=line[0].get_color(),
            )
    if computes:
        _log_axis(ax, "x", min(computes), max(computes))
        positive = [y for y in ys if y > 0]
        if positive:
            _log_axis(ax, "y", min(positive), max(positive))
    ax.set_xlabel("training compute C (FLOPs)")
    ax.set_ylabel(f"final {with_unit(report.metric)}")
    ax.set_title(f"{report.metric} against compute across {report.key} (point labels): mean over seeds", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        _legend_outside(ax, title=INTERVAL)
    return fig


def plot_scaling(report, path: Path) -> Path:
    return _save(_pyplot(), figure_scaling(report), path)
