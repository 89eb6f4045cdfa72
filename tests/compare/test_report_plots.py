"""Each plot kind rendered from a synthetic sweep and read back as matplotlib objects: axis
labels with units, the legend's box outside the axes, error bar half-widths equal to the 95%
Student-t interval of the mean (SciPy's t quantile the reference), limits that do not exaggerate,
plain tick labels on log axes, arms named by their change."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.compare.sweeps import write_sweep

stats = pytest.importorskip("scipy.stats", reason="SciPy's t quantile is the reference for the error bars")
pytest.importorskip("matplotlib")

SEEDS = {0: 0.0, 1: 0.013, 2: -0.009}


def _t_half(values: list[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def _bar_halves(ax, vertical: bool = True) -> list[float]:
    """Half-widths of every error bar drawn on `ax` (from each ErrorbarContainer's bar lines)."""
    from matplotlib.container import ErrorbarContainer

    out = []
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        for collection in container.lines[2]:
            for seg in collection.get_segments():
                (x0, y0), (x1, y1) = seg
                out.append(abs(y1 - y0) / 2 if vertical else abs(x1 - x0) / 2)
    return out


def _series_x(ax) -> list[tuple]:
    """The x values of each error-bar series' data line."""
    from matplotlib.container import ErrorbarContainer

    return [tuple(c.lines[0].get_xdata()) for c in ax.containers if isinstance(c, ErrorbarContainer)]


def _legend_outside(fig, ax) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    assert legend is not None
    box, axes = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.x0 >= axes.x1 or box.y0 >= axes.y1 or box.x1 <= axes.x0 or box.y1 <= axes.y0, (box, axes)


def _plain_ticks(axis) -> None:
    labels = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
    assert labels and not any("times" in s or "×" in s or "^" in s for s in labels), labels
    assert not [t.get_text() for t in axis.get_minorticklabels() if t.get_text()]  # one set of labels


def _plain_sweep(root: Path) -> Path:
    runs = []
    for norm, base in (("pre", 3.0), ("post", 3.2), ("rms", 3.02)):
        for seed, noise in SEEDS.items():
            runs.append(({"model.norm": norm, "seed": seed}, base + noise * (2 if norm == "post" else 1)))
    return write_sweep(root, runs)


@pytest.fixture
def plain(tmp_path):
    from zoo.compare.report import compare

    return compare([_plain_sweep(tmp_path / "sweep")], tmp_path / "out", plots=False)


def test_the_final_plot_is_a_dot_plot_with_t_intervals(plain):
    from zoo.compare.plots import figure_final

    fig = figure_final(plain)
    ax = fig.axes[0]
    assert "nats per token" in ax.get_xlabel()
    assert not [p for p in ax.patches if p.get_width() > 0]  # no bars: dots only
    finals = [list(a.finals("val/loss").values()) for a in plain.arms]
    assert sorted(_bar_halves(ax, vertical=False)) == pytest.approx(sorted(_t_half(v) for v in finals), rel=1e-6)
    low, high = ax.get_xlim()
    values = [v for vs in finals for v in vs]
    assert low < min(values) and high > max(values) and (high - low) < 2 * (max(values) - min(values)) + 0.3
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["norm=pre (baseline)", "norm=post", "norm=rms"]  # named by change, not "arm N"
    assert any("95%" in t.get_text() for t in ax.get_legend().get_texts())
    _legend_outside(fig, ax)


def test_a_dense_arm_is_not_named_by_the_mixture_keys_it_does_not_read(tmp_path):
    """Dense against two mixtures that differ in model.moe_top_k and task.moe_balance: the dense
    arm holds both at their defaults, read by nothing, so its name is model.ffn=dense alone, in
    the figures and in the report's sentences; the tables still give every run's settings."""
    from zoo.compare.plots import figure_final
    from zoo.compare.report import compare

    arms = (
        ({"model.ffn": "dense", "task.moe_balance": 0.01}, 3.0),
        ({"model.ffn": "moe", "model.moe_top_k": 1, "task.moe_balance": 0.01}, 2.9),
        ({"model.ffn": "moe", "model.moe_top_k": 2, "task.moe_balance": 0.0}, 2.95),
    )
    runs = [({**config, "seed": seed}, loss + noise) for config, loss in arms for seed, noise in SEEDS.items()]
    report = compare([write_sweep(tmp_path / "sweep", runs)], tmp_path / "out", plots=False)
    assert report.keys == ["model.ffn", "task.moe_balance", "model.moe_top_k"]  # in config order
    labels = [t.get_text() for t in figure_final(report).axes[0].get_yticklabels()]
    assert labels == [
        "ffn=dense (baseline)",
        "ffn=moe, task.moe_balance=0.01, moe_top_k=1",
        "ffn=moe, task.moe_balance=0.0, moe_top_k=2",
    ]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "arm 0 (model.ffn=dense)" in text and "model.ffn=dense," not in text
    assert "arm 1 (model.ffn=moe, task.moe_balance=0.01, model.moe_top_k=1)" in text
    assert [row["model.moe_top_k"] for row in report.rows()] == ["2", "1", "2"]  # what each run set


def test_the_curves_have_units_and_a_t_band(plain):
    from zoo.compare.plots import figure_curves

    fig = figure_curves(plain)
    ax = fig.axes[0]
    assert "nats per token" in ax.get_ylabel() and "tokens" in ax.get_xlabel()
    assert "95%" in ax.get_title()
    band = ax.collections[0].get_paths()[0].vertices[:, 1]  # the baseline's band at its one point
    first = [r.curve[0][1] for r in plain.arms[0].runs]
    mean = sum(first) / len(first)
    assert max(band) - mean == pytest.approx(_t_half(first), rel=1e-6)
    _legend_outside(fig, ax)


def test_the_length_plot_has_plain_log_ticks_and_t_bars(plain):
    from zoo.compare.plots import figure_lengths

    plain.lengths = [
        {"arm": arm, "trained": 64, "cells": {1: (20.0 + i, 1.5, 3), 2: (24.0 + i, 2.0, 3), 4: (70.0 + 3 * i, 4.0, 3)}}
        for i, arm in enumerate(plain.arms)
    ]
    fig = figure_lengths(plain)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "evaluation length (tokens)" and "perplexity" in ax.get_ylabel()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    fig.canvas.draw()
    _plain_ticks(ax.xaxis)
    _plain_ticks(ax.yaxis)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64", "128", "256"]
    t = float(stats.t.ppf(0.975, 2))
    halves = sorted(_bar_halves(ax))
    assert halves == pytest.approx(sorted([t * s / math.sqrt(3) for s in (1.5, 2.0, 4.0)] * 3), rel=1e-6)
    xs = _series_x(ax)
    assert len(xs) == 3 and len(set(xs)) == 3  # offset: no series drawn on top of another
    assert "95%" in ax.get_legend().get_title().get_text()
    _legend_outside(fig, ax)


def test_the_tuning_plot_labels_the_rates_tried(tmp_path):
    from zoo.compare.plots import figure_tuning
    from zoo.compare.tune import compare_tuned

    runs = []
    for norm, shift in (("pre", 0.0), ("post", 0.1)):
        for lr, extra in ((1e-3, 0.2), (3e-3, 0.0), (1e-2, 0.15)):
            for seed, noise in SEEDS.items():
                runs.append(({"model.norm": norm, "optim.lr": lr, "seed": seed}, 3.0 + shift + extra + noise))
    report = compare_tuned([write_sweep(tmp_path / "sweep", runs)], tmp_path / "out", key="optim.lr", plots=False)
    fig = figure_tuning(report)
    ax = fig.axes[0]
    assert "nats per token" in ax.get_ylabel() and "optim.lr" in ax.get_xlabel()
    fig.canvas.draw()
    _plain_ticks(ax.xaxis)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.001", "0.003", "0.01"]
    noise = [3.0 + v for v in SEEDS.values()]
    assert _bar_halves(ax) == pytest.approx([_t_half(noise)] * 6, rel=1e-6)
    pre, post = _series_x(ax)
    assert pre != post  # offset along the axis
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["norm=pre (baseline)", "norm=post"]
    _legend_outside(fig, ax)


def test_the_scaling_plot_has_one_plain_label_per_log_axis(tmp_path):
    from zoo.compare.plots import figure_scaling
    from zoo.compare.scale import compare_scaled

    runs = []
    for act, shift in (("gelu", 0.05), ("swiglu", 0.0)):
        for width, loss in ((16, 4.4), (32, 4.0), (64, 3.7), (128, 3.45)):
            for seed, noise in SEEDS.items():
                runs.append(({"model.activation": act, "model.d_model": width, "seed": seed}, loss + shift + noise))
    sweep = write_sweep(
        tmp_path / "sweep", runs, flops=lambda c: 1000 * c["model.d_model"], params=lambda c: 50 * c["model.d_model"]
    )
    report = compare_scaled([sweep], tmp_path / "out", key="model.d_model", plots=False)
    fig = figure_scaling(report)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "training compute C (FLOPs)" and "nats per token" in ax.get_ylabel()
    fig.canvas.draw()
    _plain_ticks(ax.xaxis)
    _plain_ticks(ax.yaxis)
    noise = [v for v in SEEDS.values()]
    assert _bar_halves(ax) == pytest.approx([_t_half(noise)] * 8, rel=1e-6)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("fit, activation=swiglu: b = ") for t in texts) and not any("arm " in t for t in texts)
    low, high = ax.get_ylim()
    half = _t_half(noise)
    lowest, highest = 3.45 - half, 4.45 + half
    assert 0 < low <= lowest and high >= highest  # every interval shown whole
    assert math.log(high / low) < 1.3 * math.log(highest / lowest)  # and the axis not padded far past them
    _legend_outside(fig, ax)


def test_each_fit_is_drawn_over_its_own_arms_compute_and_no_further(tmp_path):
    """Arms whose sizes span different compute: each fitted line starts at its arm's smallest
    compute and ends at its largest (the report extrapolates no fit), never over another arm's."""
    from zoo.compare.plots import figure_scaling
    from zoo.compare.scale import compare_scaled

    widths = {"gelu": (16, 32, 64, 128), "swiglu": (64, 128, 256, 512)}
    runs = []
    for act, sizes in widths.items():
        for width in sizes:
            for seed, noise in SEEDS.items():
                loss = 6.0 * width**-0.1 + noise
                runs.append(({"model.activation": act, "model.d_model": width, "seed": seed}, loss))
    sweep = write_sweep(tmp_path / "sweep", runs, flops=lambda c: 1000 * c["model.d_model"])
    report = compare_scaled([sweep], tmp_path / "out", key="model.d_model", plots=False)
    assert all(arm.fit is not None for arm in report.arms)
    ax = figure_scaling(report).axes[0]
    drawn = {line.get_label(): line.get_xdata() for line in ax.get_lines() if line.get_label().startswith("fit, ")}
    assert len(drawn) == 2
    for arm in report.arms:
        (xs,) = [
            x for label, x in drawn.items() if label.startswith(f"fit, activation={arm.settings['model.activation']}")
        ]
        computes = [s.compute for s in arm.scored]
        assert (min(xs), max(xs)) == pytest.approx((min(computes), max(computes)), rel=1e-9)


@pytest.mark.parametrize(
    "value, label",
    [
        (3e-4, "3e-4"),
        (1e-4, "1e-4"),
        (2.5e-5, "2.5e-5"),
        (0.003, "0.003"),
        (70, "70"),
        (2048, "2048"),
        (1e15, "1e15"),
        (3.2e6, "3.2e6"),
    ],
)
def test_tick_labels_are_plain_below_a_thousandth_and_above_1e5(value, label):
    from zoo.compare.plots import _tick

    assert _tick(value) == label
