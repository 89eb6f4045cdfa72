"""The comparison's figures: validation loss against tokens seen per arm (mean over seeds,
shaded min-max band), and the final metric per arm with its standard deviation. Matplotlib's
Agg backend: files only."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.compare.stats import mean_std
from zoo.config.records.atomic import replacing


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    """Lay out, write `path` and free the figure."""
    fig.tight_layout()
    with replacing(path, binary=True) as handle:
        fig.savefig(handle, dpi=120, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def _label(report, arm) -> str:
    settings = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in arm.settings.items())
    return f"{arm.name}: {settings}" if settings else arm.name


def plot_curves(report, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm in report.arms:
        curves = [r.curve for r in arm.runs if r.curve]
        if not curves:
            continue
        # points every seed has (an unfinished run stops early; a preempted one validates once more)
        by_tokens = [dict(c) for c in curves]
        tokens = np.array(sorted(set.intersection(*(set(d) for d in by_tokens))))
        if not len(tokens):
            continue
        losses = np.array([[d[t] for t in tokens] for d in by_tokens])  # (seeds, points)
        line, = ax.plot(tokens, losses.mean(0), label=_label(report, arm), marker="o", markersize=3)
        if len(curves) > 1:
            ax.fill_between(tokens, losses.min(0), losses.max(0), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("validation loss")
    ax.set_title("validation loss (mean over seeds, band: min-max)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def plot_final(report, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(report.arms)))
    names, means, stds = [], [], []
    for arm in report.arms:
        finals = list(arm.finals(report.metric).values())
        names.append(_label(report, arm) + ("" if finals else " (no finished run)"))
        mean, std = mean_std(finals) if finals else (0.0, 0.0)
        means.append(mean)
        stds.append(std)
    y = np.arange(len(names))
    colors = ["tab:gray" if arm is report.baseline else "tab:blue" for arm in report.arms]
    ax.barh(y, means, xerr=stds, color=colors, capsize=3)
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"final {report.metric} (mean ± std over seeds; grey: baseline)")
    if any(means):
        low = min(m - s for m, s in zip(means, stds) if m)
        ax.set_xlim(left=max(0.0, low - 0.05 * abs(low)))
    return _save(plt, fig, path)


def plot_lengths(report, path: Path) -> Path:
    """Perplexity against evaluation length per arm (log-log); arms past their learned table
    stop where the table ends."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for row in report.lengths:
        points = [(row["trained"] * m if row["trained"] else m, cell[0], cell[1])
                  for m, cell in row["cells"].items() if isinstance(cell, tuple)]
        if not points:
            continue
        x, y, err = zip(*points)
        stops = any(not isinstance(cell, tuple) for cell in row["cells"].values())
        label = _label(report, row["arm"]) + (f" (none past {max(x)})" if stops else "")
        ax.errorbar(x, y, yerr=err, marker="s" if stops else "o", markersize=6 if stops else 3, capsize=2,
                    label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("validation perplexity")
    ax.set_title("length extrapolation (mean ± std over seeds)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def plot_tuning(report, path: Path) -> Path:
    """Final metric (mean ± std over seeds) against the tuned key, one line per arm, its best
    value ringed; a logarithmic axis when every value is a positive number (learning rates)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    numeric = all(isinstance(p.value, (int, float)) and not isinstance(p.value, bool) and p.value > 0
                  for arm in report.arms for p in arm.points)
    for arm in report.arms:
        points = [p for p in arm.points if p.mean is not None]
        if not points:
            continue
        xs = [p.value if numeric else str(p.value) for p in points]
        line = ax.errorbar(xs, [p.mean for p in points], yerr=[p.std or 0.0 for p in points], marker="o",
                           capsize=3, label=_label(report, arm))
        if arm.best is not None:
            ax.scatter([arm.best.value if numeric else str(arm.best.value)], [arm.best.mean], s=160,
                       facecolors="none", edgecolors=line[0].get_color(), linewidths=1.5)
    if numeric:
        ax.set_xscale("log")
    ax.set_xlabel(report.key)
    ax.set_ylabel(f"final {report.metric}")
    ax.set_title(f"each arm at its own best {report.key} (ringed)")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def plot_scaling(report, path: Path) -> Path:
    """Final metric against training compute, log-log: each arm's sizes (mean ± std over seeds)
    and its fitted power law over the compute range of all arms, one colour per arm."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    computes = [s.compute for arm in report.arms for s in arm.scored]
    for arm in report.arms:
        sizes = arm.scored
        if not sizes:
            continue
        line = ax.errorbar([s.compute for s in sizes], [s.mean for s in sizes], yerr=[s.std or 0.0 for s in sizes],
                           marker="o", linestyle="none", capsize=3, label=_label(report, arm))
        if arm.fit is not None and computes:
            xs = np.geomspace(min(computes), max(computes), 100)
            ax.plot(xs, [arm.fit.loss_at(x) for x in xs], color=line[0].get_color(), linewidth=1.2,
                    label=f"{arm.name} fit: b = {arm.fit.b:.3f}")
        for s in sizes:
            ax.annotate(f"{s.value}", (s.compute, s.mean), textcoords="offset points", xytext=(4, 4), fontsize=7,
                        color=line[0].get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter

    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))  # plain numbers on the log axis
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2f"))
    ax.set_xlabel("training compute C (FLOPs)")
    ax.set_ylabel(f"final {report.metric}")
    ax.set_title(f"{report.metric} against compute across {report.key} (labels)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)
