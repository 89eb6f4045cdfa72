"""zoo-compare ranks arms on a harness task metric (`metric=harness/TASK/acc`, the last value of
`callbacks.downstream` in each run's summary.json): mean over seeds, the paired interval SciPy
gives, and a verdict that knows a higher accuracy is better."""

from __future__ import annotations

import csv
import json
import math

import pytest

from tests.compare.sweeps import write_sweep

stats = pytest.importorskip("scipy.stats", reason="SciPy is the reference for the intervals")

METRIC = "harness/kjv_next_verse/acc"
SEEDS = {0: 0.0, 1: 0.02, 2: -0.01, 3: 0.005}


def _sweep(root):
    """rope 0.05 more accurate than learned (the baseline) on the task, the same val/loss."""
    acc = {"learned": lambda n: 0.40 + n, "rope": lambda n: 0.45 + n + 0.004}
    runs, values = [], []
    for kind, value in acc.items():
        for seed, noise in SEEDS.items():
            runs.append(({"model.position.kind": kind, "seed": seed}, 3.0))
            values.append(value(noise) + (0.003 * seed if kind == "rope" else 0.0))
    write_sweep(root, runs)
    for i, value in enumerate(values):  # the callback's final scores, as finish() writes them
        path = root / str(i) / "summary.json"
        summary = json.loads(path.read_text())
        summary["metrics"].update({METRIC: value, "harness/kjv_next_verse/acc_stderr": 0.03})
        path.write_text(json.dumps(summary))
    return values[:4], values[4:]


def test_arms_are_ranked_on_a_task_metric_with_its_paired_interval(tmp_path):
    from zoo.compare.report import compare

    base, arm = _sweep(tmp_path / "sweep")
    compare([tmp_path / "sweep"], tmp_path / "out", metric=METRIC, plots=False)
    with (tmp_path / "out" / "report.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert float(rows[1][f"{METRIC} mean"]) == pytest.approx(sum(arm) / 4, rel=1e-9)
    deltas = [a - b for a, b in zip(arm, base)]
    mean = sum(deltas) / 4
    sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / 3)
    half = float(stats.t.ppf(0.975, 3)) * sd / 2
    assert float(rows[1]["ci_low"]) == pytest.approx(mean - half, rel=1e-6)
    assert float(rows[1]["ci_high"]) == pytest.approx(mean + half, rel=1e-6)
    assert float(rows[1]["p"]) == pytest.approx(float(stats.ttest_rel(arm, base).pvalue), rel=1e-4)
    verdict = (tmp_path / "out" / "report.md").read_text().splitlines()[2]
    assert verdict.startswith(f"Verdict: arm 1 (model.position.kind=rope) has the highest mean final {METRIC}")
    assert "fraction correct above arm 0" in verdict and "the data favour it" in verdict
