"""Noise beyond seeds in a report: each run's spread over its last k validations beside the
spread across seeds (kept in runs.csv and rebuilt from it), and the split of the variance
between the init seed and the data-order seed when a sweep crosses them, against an ordinary
least-squares analysis of variance written here with numpy."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from tests.compare.sweeps import write_sweep

CURVE = [0.30, 0.12, 0.05, 0.02, -0.01, 0.03, 0.0]  # offsets of a run's 7 validations from its final value


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _with_curves(sweep: Path, scale: dict[str, float]) -> dict[str, list[float]]:
    """Each run's metrics.csv with 7 validations ending at its final value, its wobble scaled by
    its arm's factor; {run directory name: its validations}."""
    curves = {}
    for job in sweep.iterdir():
        final = float(_final(job))
        kind = next(
            line.split("=", 1)[1]
            for line in (job / ".hydra" / "overrides.yaml").read_text().split("\n")
            if "model.position.kind" in line
        )
        values = [final + scale[kind.strip()] * c for c in CURVE[:-1]] + [final]
        rows = ["step,tokens_seen,val/loss"] + [f"{10 * (i + 1)},{1000 * (i + 1)},{v!r}" for i, v in enumerate(values)]
        (job / "metrics.csv").write_text("\n".join(rows) + "\n")
        curves[job.name] = values
    return curves


def _final(job: Path) -> float:
    import json

    return json.loads((job / "summary.json").read_text())["metrics"]["val/loss"]


def _sd(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _about_line(steps: list[float], values: list[float]) -> float:
    """The spread about the least-squares line (numpy's fit), on n − 2 degrees of freedom."""
    fit = np.polyfit(steps, values, 1)
    residual = np.asarray(values) - np.polyval(fit, steps)
    return float(np.sqrt((residual**2).sum() / (len(values) - 2)))


def test_each_runs_last_k_spread_stands_beside_the_seed_spread_and_rebuilds(tmp_path):
    from zoo.compare.recompute import compare_rebuilt, rebuild
    from zoo.compare.report import compare

    seeds = {0: 0.0, 1: 0.011, 2: -0.008}
    runs = [
        ({"model.position.kind": kind, "seed": s}, base + n)
        for kind, base in (("rope", 3.0), ("alibi", 2.9))
        for s, n in seeds.items()
    ]
    sweep = write_sweep(tmp_path / "sweep", runs)
    curves = _with_curves(sweep, {"rope": 1.0, "alibi": 0.1})
    compare([sweep], tmp_path / "out", plots=False, last_k=5)
    table = {r["run"]: float(r["last_k_sd"]) for r in _rows(tmp_path / "out" / "runs.csv")}
    for name, values in curves.items():
        steps = [10.0 * (i + 1) for i in range(len(values))]
        assert table[name] == pytest.approx(_about_line(steps[-5:], values[-5:]), rel=1e-9)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Noise beyond seeds" in md and "| arm | seeds | seed spread | last-5 spread (runs) |" in md
    for arm, jobs in (("arm 0", ("0", "1", "2")), ("arm 1", ("3", "4", "5"))):
        rms = math.sqrt(sum(table[j] ** 2 for j in jobs) / 3)
        finals = [curves[j][-1] for j in jobs]
        # the last 5 of 7 validations start at step 30 of 70: in the first half, so marked
        assert f"| {arm} | 3 | {_sd(finals):.4f} | {rms:.4f} (3)† |" in md
    assert "† The last 5 validations of some of the arm's runs start in the first half of the run" in md
    assert {r["last_k_from"] for r in _rows(tmp_path / "out" / "runs.csv")} == {repr(30 / 70)}
    rebuilt = tmp_path / "again"
    spec = rebuild(tmp_path / "out", rebuilt)
    lines, equal = compare_rebuilt(tmp_path / "out", rebuilt, spec)
    assert equal and spec["last_k"] == 5, "\n".join(lines)
    assert (rebuilt / "report.md").read_text() == md


def test_a_window_in_the_runs_second_half_is_not_marked(tmp_path):
    """last_k=3 of 7 validations starts at step 50 of 70: the spread stands without the mark,
    and runs.csv gives where it starts."""
    from zoo.compare.report import compare

    runs = [
        ({"model.position.kind": kind, "seed": s}, base + 0.01 * s)
        for kind, base in (("rope", 3.0), ("alibi", 2.9))
        for s in range(3)
    ]
    sweep = write_sweep(tmp_path / "sweep", runs)
    _with_curves(sweep, {"rope": 1.0, "alibi": 0.1})
    compare([sweep], tmp_path / "out", plots=False, last_k=3)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| last-3 spread (runs) |" in md and "†" not in md
    assert {r["last_k_from"] for r in _rows(tmp_path / "out" / "runs.csv")} == {repr(50 / 70)}


def test_the_last_k_spread_is_taken_about_the_tails_trend():
    """A tail on a straight line has no spread; one point off it, the residual's."""
    from zoo.compare.noise import detrended_sd

    assert detrended_sd([(10.0, 3.0), (20.0, 2.9), (30.0, 2.8), (40.0, 2.7)]) == pytest.approx(0.0, abs=1e-12)
    steps, values = [10.0, 20.0, 30.0, 40.0], [3.0, 2.95, 2.8, 2.7]
    assert detrended_sd(list(zip(steps, values))) == pytest.approx(_about_line(steps, values), rel=1e-9)


def test_a_sweep_with_one_validation_per_run_has_no_noise_section(tmp_path):
    from zoo.compare.report import compare

    runs = [({"model.position.kind": k, "seed": s}, 3.0 + 0.01 * s) for k in ("rope", "alibi") for s in range(3)]
    compare([write_sweep(tmp_path / "sweep", runs)], tmp_path / "out", plots=False)
    assert "Noise beyond seeds" not in (tmp_path / "out" / "report.md").read_text()
    assert "last_k_sd" not in _rows(tmp_path / "out" / "runs.csv")[0]


INIT = {0: 0.02, 1: -0.01, 2: -0.01}  # init-seed effects
ORDER = {0: 0.004, 1: -0.006, 2: 0.002}  # data-order effects, smaller
RESID = [[0.001, -0.002, 0.001], [-0.0015, 0.0005, 0.001], [0.0005, 0.0015, -0.002]]


def _anova(y: np.ndarray) -> tuple[float, float, float]:
    """(MS init, MS order, MS resid) by least squares: the residual of the additive two-way model
    and the extra sum of squares each factor explains over the model without it."""
    a, b = y.shape
    rows, cols = np.repeat(np.arange(a), b), np.tile(np.arange(b), a)

    def rss(*factors: np.ndarray) -> float:
        x = np.column_stack([np.ones(a * b)] + [np.eye(n)[f][:, 1:] for n, f in factors])
        fit = np.linalg.lstsq(x, y.ravel(), rcond=None)[0]
        return float(((y.ravel() - x @ fit) ** 2).sum())

    full = rss((a, rows), (b, cols))
    return (
        (rss((b, cols)) - full) / (a - 1),
        (rss((a, rows)) - full) / (b - 1),
        full / ((a - 1) * (b - 1)),
    )


def test_crossed_init_and_data_order_seeds_split_the_variance(tmp_path):
    from zoo.compare.report import compare

    runs = []
    for kind, base, wobble in (("rope", 3.0, 1.0), ("alibi", 2.95, -1.0)):
        for i in INIT:
            for j in ORDER:
                runs.append(
                    (
                        {"model.position.kind": kind, "seed": i, "data.order_seed": j},
                        base + INIT[i] + ORDER[j] + wobble * RESID[i][j],
                    )
                )
    report = compare([write_sweep(tmp_path / "sweep", runs)], tmp_path / "out", plots=False)
    assert len(report.arms) == 2 and all(len(a.runs) == 9 for a in report.arms)  # the order seed is no arm's setting
    assert report.arms[1].diff is not None and report.arms[1].diff.df == 8  # paired over the 9 (seed, order) runs
    for part, wobble in zip(report.parts, (1.0, -1.0)):
        assert not isinstance(part, str)
        y = np.array([[INIT[i] + ORDER[j] + wobble * RESID[i][j] for j in ORDER] for i in INIT])
        ms_init, ms_order, ms_resid = _anova(y)
        assert (part.ms_init, part.ms_order, part.ms_resid) == pytest.approx((ms_init, ms_order, ms_resid), rel=1e-6)
        assert part.init == pytest.approx(max(0.0, (ms_init - ms_resid) / 3), rel=1e-6)
        assert part.order == pytest.approx(max(0.0, (ms_order - ms_resid) / 3), rel=1e-6)
        assert part.share(part.init) > part.share(part.order) > 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Variance: initialisation and data order" in md and "| arm 0 | 3 × 3 |" in md
    assert "Seeds: 0, 1, 2, 0/1, 0/2, 1/0, 1/2, 2/0, 2/1." in md  # SEED/ORDER where they differ
    assert _rows(tmp_path / "out" / "runs.csv")[1]["data.order_seed"] == "1"
    from zoo.compare.recompute import compare_rebuilt, rebuild

    spec = rebuild(tmp_path / "out", tmp_path / "again")
    lines, equal = compare_rebuilt(tmp_path / "out", tmp_path / "again", spec)
    assert equal and spec["order_seed"] is True, "\n".join(lines)


def test_seeds_that_do_not_cross_are_named_not_split(tmp_path):
    from zoo.compare.report import compare

    pairs = [(0, 0), (0, 1), (1, 0), (1, 2)]  # four runs, not a 2 × 3 crossing
    runs = [
        ({"model.position.kind": "rope", "seed": i, "data.order_seed": j}, 3.0 + 0.01 * i + 0.003 * j) for i, j in pairs
    ]
    runs += [({"model.position.kind": "alibi", "seed": i}, 2.9 + 0.01 * i) for i in range(3)]
    report = compare([write_sweep(tmp_path / "sweep", runs)], tmp_path / "out", plots=False)
    assert report.parts == ["arm 0: 4 runs over 2 init seeds and 3 data-order seeds do not cross completely"]
    assert (
        "- arm 0: 4 runs over 2 init seeds and 3 data-order seeds do not cross completely: left out"
        in (tmp_path / "out" / "report.md").read_text()
    )


def test_a_rebuild_takes_the_last_k_spread_from_runs_csv_alone(tmp_path, monkeypatch):
    """Run from the directory holding the sweep, a rebuild could reach the runs' metrics.csv by
    runs.csv's names: it reads them not, so a table without the column rebuilds no noise section."""
    import json

    from zoo.compare.recompute import rebuild
    from zoo.compare.report import compare

    runs = [({"model.position.kind": k, "seed": s}, 3.0 + 0.01 * s) for k in ("rope", "alibi") for s in range(3)]
    sweep = write_sweep(tmp_path / "sweep", runs)
    _with_curves(sweep, {"rope": 1.0, "alibi": 0.5})
    compare([sweep], tmp_path / "out", plots=False)
    rows = _rows(tmp_path / "out" / "runs.csv")
    assert "## Noise beyond seeds" in (tmp_path / "out" / "report.md").read_text() and rows[0]["last_k_sd"]
    with (tmp_path / "out" / "runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[c for c in rows[0] if c != "last_k_sd"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    spec = json.loads((tmp_path / "out" / "comparison.json").read_text())
    del spec["last_k"]
    (tmp_path / "out" / "comparison.json").write_text(json.dumps(spec))
    monkeypatch.chdir(tmp_path)  # where sweep/0/metrics.csv is found by runs.csv's names
    rebuild(tmp_path / "out", tmp_path / "again")
    assert "Noise beyond seeds" not in (tmp_path / "again" / "report.md").read_text()
