"""zoo-compare's routing picture (routing.png): one heatmap per mixture-of-experts arm of E x each
expert's last load per layer and seed (never averaged over seeds), read from summary.json; a
collapsed arm shows its hot expert; a comparison without routing draws none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.compare.sweeps import write_sweep

pytest.importorskip("matplotlib")

# (layers, experts) loads of the balanced and the collapsed arm, per seed
BALANCED = {0: [[0.25, 0.25, 0.3, 0.2], [0.2, 0.3, 0.25, 0.25]], 1: [[0.25, 0.25, 0.2, 0.3], [0.3, 0.2, 0.25, 0.25]]}
COLLAPSED = {0: [[0.5, 0.5, 0.0, 0.0], [0.9, 0.1, 0.0, 0.0]], 1: [[0.5, 0.5, 0.0, 0.0], [0.7, 0.3, 0.0, 0.0]]}


def _sweep(root: Path, routing: bool = True, rates: tuple = ()) -> Path:
    """Two arms x seeds 0, 1 (and, with `rates`, x those optim.lr: the last one best, and the
    only one that logged the routing the arm is known by; the others logged a uniform load)."""
    runs = [
        (
            {"task.moe_balance": b, "seed": s, **({"optim.lr": lr} if rates else {})},
            3.0 + 0.01 * s + (0.1 if b == 0 else 0.0) - 0.05 * i,
        )
        for b in (0.01, 0.0)
        for i, lr in enumerate(rates or [None])
        for s in (0, 1)
    ]
    write_sweep(root, runs)
    if routing:
        for i, (config, _) in enumerate(runs):
            loads = (BALANCED if config["task.moe_balance"] else COLLAPSED)[config["seed"]]
            if rates and config["optim.lr"] != rates[-1]:
                loads = [[0.25] * 4, [0.25] * 4]
            path = root / str(i) / "summary.json"
            summary = json.loads(path.read_text())
            summary["metrics"].update(
                {
                    f"train/moe_load/layer_{layer}/expert_{e}": v
                    for layer, row in enumerate(loads)
                    for e, v in enumerate(row)
                }
            )
            path.write_text(json.dumps(summary))
    return root


def test_each_mixture_arm_gets_its_heatmap_of_each_seeds_load(tmp_path):
    from zoo.compare.report import compare
    from zoo.compare.routing_plot import figure_routing

    report = compare([_sweep(tmp_path / "sweep")], tmp_path / "out")
    assert (tmp_path / "out" / "routing.png").is_file()
    assert "![expert load per mixture layer](routing.png)" in (tmp_path / "out" / "report.md").read_text()
    fig = figure_routing(report)
    heatmaps = [ax for ax in fig.axes if ax.images and ax.get_xlabel() == "expert"]
    assert [ax.get_title() for ax in heatmaps] == ["task.moe_balance=0.01 (baseline)", "task.moe_balance=0.0"]
    collapsed = heatmaps[1].images[0].get_array()
    # rows layer-major, one per seed: E x each seed's own load, never a mean over seeds
    assert [t.get_text() for t in heatmaps[1].get_yticklabels()] == ["L0 s0", "L0 s1", "L1 s0", "L1 s1"]
    assert collapsed[2].tolist() == pytest.approx([4 * 0.9, 4 * 0.1, 0.0, 0.0])
    assert collapsed[3].tolist() == pytest.approx([4 * 0.7, 4 * 0.3, 0.0, 0.0])
    assert heatmaps[0].images[0].get_array()[0].tolist() == pytest.approx([1.0, 1.0, 1.2, 0.8])
    assert "1 = balanced" in fig.axes[-1].get_ylabel()  # the colour bar says what the colour is


def test_a_comparison_without_routing_draws_none(tmp_path):
    from zoo.compare.report import compare

    compare([_sweep(tmp_path / "sweep", routing=False)], tmp_path / "out")
    assert not (tmp_path / "out" / "routing.png").exists()
    assert "routing.png" not in (tmp_path / "out" / "report.md").read_text()


def test_a_tuned_report_draws_each_arm_at_its_best_value(tmp_path):
    from zoo.compare.routing_plot import figure_routing
    from zoo.compare.tune import compare_tuned

    report = compare_tuned([_sweep(tmp_path / "sweep", rates=(1e-3, 1e-2))], tmp_path / "out", key="optim.lr")
    assert (tmp_path / "out" / "routing.png").is_file()
    assert "(routing.png)" in (tmp_path / "out" / "report.md").read_text()
    heatmaps = [ax for ax in figure_routing(report, tuned="optim.lr").axes if ax.images]
    assert [ax.get_title().split("\n")[1] for ax in heatmaps] == ["at optim.lr=0.01", "at optim.lr=0.01"]
    # the collapsed arm's rows are its runs at 1e-2, not the uniform ones at 1e-3
    assert heatmaps[1].images[0].get_array()[2].tolist() == pytest.approx([4 * 0.9, 4 * 0.1, 0.0, 0.0])
