"""equivalence=, threshold= and last_k= with tune= (read on the held-out leave-one-seed-out values)
and scale= (one reading per arm and size, with and without tune=), on synthetic sweeps: every
p-value, interval and reading recomputed here from the raw values with SciPy and numpy, the
verdict's wording, and the report rebuilt by recompute= from its tables."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.compare.sweeps import write_sweep

stats = pytest.importorskip("scipy.stats", reason="SciPy is the reference for the tests recomputed here")

SEEDS = {0: 0.0, 1: 0.011, 2: -0.008, 3: 0.004}
WOBBLE = {1e-3: {0: 0.003, 1: -0.002, 2: 0.001, 3: 0.0}, 3e-3: {0: 0.0, 1: 0.002, 2: -0.003, 3: 0.004}}
WIDE = {0: 0.05, 1: -0.04, 2: 0.03, 3: -0.03}
# kind -> (offset at seed s, the rate's effect): rope's two rates are close, so leaving a seed out
# can move its choice; alibi is best at the other rate
KINDS = {
    "sinusoidal": (lambda s: 0.0, {1e-3: 0.2, 3e-3: 0.0}),  # the baseline
    "rope": (lambda s: 0.001 + 0.0005 * s, {1e-3: 0.0, 3e-3: -0.001}),
    "alibi": (lambda s: -0.1 + 0.002 * s, {1e-3: 0.0, 3e-3: 0.15}),
    "learned": (lambda s: WIDE[s], {1e-3: 0.2, 3e-3: 0.0}),
}
MARGIN, TARGET, ALPHA = 0.02, 2.95, 0.05
CURVE = [0.30, 0.12, 0.05, 0.02, -0.01, 0.03, 0.0]  # a run's 7 validations, offsets from its final value


def _loss(kind: str, lr: float, seed: int, base: float = 3.0) -> float:
    offset, effect = KINDS[kind]
    return base + SEEDS[seed] + WOBBLE[lr][seed] + offset(seed) + effect[lr]


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _held_out(by_lr: dict[float, dict[int, float]]) -> tuple[dict[int, float], dict[int, float]]:
    """({seed: value at the rate with the lowest mean over the other seeds}, {seed: that rate})."""
    values, chosen = {}, {}
    for seed in next(iter(by_lr.values())):
        lr = min(by_lr, key=lambda r: np.mean([v for s, v in by_lr[r].items() if s != seed]))
        values[seed], chosen[seed] = by_lr[lr][seed], lr
    return values, chosen


def _tost(d: list[float], m: int) -> dict:
    """The two one-sided tests of paired differences `d` against ±MARGIN in a family of m, and
    the reading: equivalent, different (the Bonferroni-adjusted 95% interval excludes 0), cannot tell."""
    lower = stats.ttest_1samp([x + MARGIN for x in d], 0.0, alternative="greater").pvalue
    upper = stats.ttest_1samp([x - MARGIN for x in d], 0.0, alternative="less").pvalue
    p_adj = min(1.0, m * max(lower, upper))
    n, mean = len(d), float(np.mean(d))
    se = float(np.std(d, ddof=1)) / math.sqrt(n)
    half = stats.t.ppf(1 - ALPHA / (2 * m), n - 1) * se
    reading = "equivalent" if p_adj < ALPHA else "different" if abs(mean) > half else "cannot tell"
    return {"p": max(lower, upper), "p_adj": p_adj, "reading": reading}


def _holm(ps: dict) -> dict:
    order, running, out = sorted(ps, key=ps.get), 0.0, {}
    for rank, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * ps[name]))
        out[name] = running
    return out


def _tuned_sweep(root: Path) -> tuple[Path, dict]:
    """4 arms × 2 rates × 4 seeds; {job name: (kind, rate, seed)}."""
    runs, where = [], {}
    for kind in KINDS:
        for lr in WOBBLE:
            for seed in SEEDS:
                where[str(len(runs))] = (kind, lr, seed)
                runs.append(({"model.position.kind": kind, "optim.lr": lr, "seed": seed}, _loss(kind, lr, seed)))
    return write_sweep(root, runs), where


def _held(kind: str, base: float = 3.0) -> tuple[dict[int, float], dict[int, float]]:
    return _held_out({lr: {s: _loss(kind, lr, s, base) for s in SEEDS} for lr in WOBBLE})


def test_a_tuned_reports_equivalence_reads_the_held_out_differences(tmp_path):
    from zoo.compare.tune import compare_tuned

    sweep, _ = _tuned_sweep(tmp_path / "sweep")
    compare_tuned([sweep], tmp_path / "out", key="optim.lr", plots=False, equivalence=MARGIN)
    rope_held, rope_lr = _held("rope")
    assert len(set(rope_lr.values())) == 2  # leaving a seed out moves rope's rate: held out is not the best rate's
    base = _held("sinusoidal")[0]
    rows = {r["model.position.kind"]: r for r in _rows(tmp_path / "out" / "report.csv")}
    for kind in ("rope", "alibi", "learned"):
        want = _tost([_held(kind)[0][s] - base[s] for s in SEEDS], m=3)
        assert float(rows[kind]["tost_p"]) == pytest.approx(want["p"], rel=1e-6), kind
        assert float(rows[kind]["tost_p_adj"]) == pytest.approx(want["p_adj"], rel=1e-6), kind
        assert rows[kind]["equivalence"] == want["reading"], kind
    assert [rows[k]["equivalence"] for k in KINDS] == ["", "equivalent", "different", "cannot tell"]
    md = (tmp_path / "out" / "report.md").read_text()
    opening = md.split("\n")[2]
    assert "Against the margin ±0.02 nats per token (two one-sided tests" in opening
    assert "on the held-out values, each seed at the optim.lr chosen on its arm's other seeds" in opening
    assert "arm 1 (model.position.kind=rope) − arm 0 (model.position.kind=sinusoidal): equivalent within ±0.02" in (
        opening
    )
    assert "## Equivalence within ±0.02" in md and "With tune=optim.lr these read the held-out values" in md


def test_a_tuned_reports_threshold_tests_each_arms_held_out_values(tmp_path):
    from zoo.compare.tune import compare_tuned

    sweep, _ = _tuned_sweep(tmp_path / "sweep")
    compare_tuned([sweep], tmp_path / "out", key="optim.lr", plots=False, threshold=TARGET)
    ps = {k: stats.ttest_1samp(list(_held(k)[0].values()), TARGET, alternative="less").pvalue for k in KINDS}
    holm = _holm(ps)
    rows = {r["model.position.kind"]: r for r in _rows(tmp_path / "out" / "report.csv")}
    for kind, row in rows.items():
        assert float(row["threshold_p"]) == pytest.approx(ps[kind], rel=1e-6)
        assert float(row["threshold_p_holm"]) == pytest.approx(holm[kind], rel=1e-6)
        assert row["reaches"] == ("yes" if holm[kind] < 0.01 else "no")
    assert rows["alibi"]["reaches"] == "yes" and rows["rope"]["reaches"] == "no"
    opening = (tmp_path / "out" / "report.md").read_text().split("\n")[2]
    assert "Threshold val/loss below 2.95 (one-sided t-test of each arm's mean, p &lt; 0.01, Holm" in opening
    assert "on the held-out values" in opening and "arm 2 shows its mean below it." in opening


def _detrended(values: list[float]) -> float:
    steps = [10.0 * (i + 1) for i in range(len(values))]
    fit = np.polyfit(steps, values, 1)
    residual = np.asarray(values) - np.polyval(fit, steps)
    return float(np.sqrt((residual**2).sum() / (len(values) - 2)))


def _with_curves(sweep: Path) -> dict[str, float]:
    """Each run's metrics.csv with 7 validations ending at its final value, its wobble scaled by
    its job number; {job name: its spread over the last 5 about their line}."""
    spreads = {}
    for job in sweep.iterdir():
        final = json.loads((job / "summary.json").read_text())["metrics"]["val/loss"]
        values = [final + (1 + int(job.name) % 5) * 0.1 * c for c in CURVE[:-1]] + [final]
        rows = ["step,tokens_seen,val/loss"] + [f"{10 * (i + 1)},{1000 * (i + 1)},{v!r}" for i, v in enumerate(values)]
        (job / "metrics.csv").write_text("\n".join(rows) + "\n")
        spreads[job.name] = _detrended(values[-5:])
    return spreads


def test_a_tuned_reports_last_k_spread_is_over_the_runs_its_held_out_values_come_from(tmp_path):
    from zoo.compare.tune import compare_tuned

    sweep, where = _tuned_sweep(tmp_path / "sweep")
    spreads = _with_curves(sweep)
    compare_tuned([sweep], tmp_path / "out", key="optim.lr", plots=False, last_k=5)
    table = {r["run"]: float(r["last_k_sd"]) for r in _rows(tmp_path / "out" / "runs.csv")}
    assert table == pytest.approx(spreads, rel=1e-9)  # every run's, in runs.csv
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Noise beyond seeds" in md and "With tune=optim.lr these read the held-out values" in md
    for i, kind in enumerate(KINDS):
        held, chosen = _held(kind)
        mine = [spreads[j] for j, (k, lr, s) in where.items() if k == kind and chosen[s] == lr]
        everyone = [spreads[j] for j, (k, _, _) in where.items() if k == kind]
        rms = math.sqrt(sum(t * t for t in mine) / len(mine))
        assert len(mine) == 4 and rms != pytest.approx(math.sqrt(sum(t * t for t in everyone) / 8), abs=1e-5)
        seed_sd = float(np.std(list(held.values()), ddof=1))
        assert f"| arm {i} | 4 | {seed_sd:.4f} | {rms:.4f} (4)† |" in md, kind  # step 30 of 70: marked


SIZES = (16, 32, 64)


def _size_loss(kind: str, width: int, seed: int, lr: float | None = None) -> float:
    """A loss falling with width; rope within ±0.02 of the baseline, alibi 0.1 below it up to
    width 32 and anywhere in ±0.05 of it at 64."""
    base = 4.0 - 0.3 * math.log2(width) + SEEDS[seed] + (WOBBLE[lr][seed] + KINDS["sinusoidal"][1][lr] if lr else 0)
    if kind == "rope":
        return base + 0.001 + 0.0005 * seed
    if kind == "alibi":
        return base + (WIDE[seed] if width == 64 else -0.1 + 0.002 * seed)
    return base


def _scaled_sweep(root: Path, rates: tuple = ()) -> Path:
    runs = [
        (
            {"model.position.kind": kind, "model.d_model": w, "seed": s, **({"optim.lr": lr} if lr else {})},
            _size_loss(kind, w, s, lr),
        )
        for kind in ("sinusoidal", "rope", "alibi")
        for w in SIZES
        for lr in rates or (None,)
        for s in SEEDS
    ]
    return write_sweep(
        root, runs, flops=lambda c: 2 * c["model.d_model"] ** 2, params=lambda c: c["model.d_model"] ** 2
    )


def test_a_scaled_report_reads_equivalence_at_each_size(tmp_path):
    from zoo.compare.scale import compare_scaled

    sweep = _scaled_sweep(tmp_path / "sweep")
    compare_scaled([sweep], tmp_path / "out", key="model.d_model", plots=False, equivalence=MARGIN)
    rows = {(r["model.position.kind"], int(r["model.d_model"])): r for r in _rows(tmp_path / "out" / "report.csv")}
    md = (tmp_path / "out" / "report.md").read_text()
    section = md.split("## Equivalence within ±0.02 at each size")[1].split("\n## ")[0]
    readings = {}
    for w in SIZES:
        assert rows[("sinusoidal", w)]["equivalence"] == ""
        for kind in ("rope", "alibi"):
            d = [_size_loss(kind, w, s) - _size_loss("sinusoidal", w, s) for s in SEEDS]
            want = _tost(d, m=6)  # 2 arms × 3 sizes
            row = rows[(kind, w)]
            assert float(row["tost_p"]) == pytest.approx(want["p"], rel=1e-6), (kind, w)
            assert float(row["tost_p_adj"]) == pytest.approx(want["p_adj"], rel=1e-6), (kind, w)
            assert row["equivalence"] == want["reading"], (kind, w)
            readings[(kind, w)] = want["reading"]
            assert f"| `{w}` | arm {1 if kind == 'rope' else 2} (model.position.kind={kind}) − arm 0 " in section
    assert readings == {
        **{("rope", w): "equivalent" for w in SIZES},
        ("alibi", 16): "different",
        ("alibi", 32): "different",
        ("alibi", 64): "cannot tell",
    }
    opening = md.split("\n")[2]
    assert "Against the margin ±0.02 nats per token (two one-sided tests" in opening
    assert "Bonferroni over the family of 6; at each size, against the baseline)" in opening
    assert "model.d_model=64, arm 2: cannot tell" in opening and "model.d_model=16, arm 2: different" in opening


def test_a_scaled_reports_threshold_and_last_k_are_per_arm_and_size(tmp_path):
    from zoo.compare.scale import compare_scaled

    sweep = _scaled_sweep(tmp_path / "sweep")
    spreads = _with_curves(sweep)
    target = 2.3
    compare_scaled([sweep], tmp_path / "out", key="model.d_model", plots=False, threshold=target, last_k=5)
    kinds = ("sinusoidal", "rope", "alibi")
    values = {(k, w): [_size_loss(k, w, s) for s in SEEDS] for k in kinds for w in SIZES}
    ps = {key: stats.ttest_1samp(v, target, alternative="less").pvalue for key, v in values.items()}
    holm = _holm(ps)
    rows = {(r["model.position.kind"], int(r["model.d_model"])): r for r in _rows(tmp_path / "out" / "report.csv")}
    for key, row in rows.items():
        assert float(row["threshold_p"]) == pytest.approx(ps[key], rel=1e-6), key
        assert float(row["threshold_p_holm"]) == pytest.approx(holm[key], rel=1e-6), key
        assert row["reaches"] == ("yes" if holm[key] < 0.01 else "no"), key
    assert {k for k, r in rows.items() if r["reaches"] == "yes"} == {("sinusoidal", 64), ("rope", 64)}
    md = (tmp_path / "out" / "report.md").read_text()
    assert "arm 0 at model.d_model=64, arm 1 at model.d_model=64 show their mean below it." in md.split("\n")[2]
    jobs = {f"{k}-{w}": [] for k in kinds for w in SIZES}  # job order: kind, width, seed
    for i, (k, w) in enumerate((k, w) for k in kinds for w in SIZES for _ in SEEDS):
        jobs[f"{k}-{w}"].append(spreads[str(i)])
    for a, k in enumerate(kinds):
        for w in SIZES:
            rms = math.sqrt(sum(t * t for t in jobs[f"{k}-{w}"]) / 4)
            seed_sd = float(np.std(values[(k, w)], ddof=1))
            assert f"| arm {a} at model.d_model={w} | 4 | {seed_sd:.4f} | {rms:.4f} (4)† |" in md, (k, w)


def test_a_scaled_and_tuned_reports_equivalence_reads_each_sizes_held_out_values(tmp_path):
    from zoo.compare.scale import compare_scaled

    sweep = _scaled_sweep(tmp_path / "sweep", rates=tuple(WOBBLE))
    compare_scaled([sweep], tmp_path / "out", key="model.d_model", tune="optim.lr", plots=False, equivalence=MARGIN)
    rows = {(r["model.position.kind"], int(r["model.d_model"])): r for r in _rows(tmp_path / "out" / "report.csv")}

    def held(kind: str, w: int) -> dict[int, float]:
        return _held_out({lr: {s: _size_loss(kind, w, s, lr) for s in SEEDS} for lr in WOBBLE})[0]

    for w in SIZES:
        base = held("sinusoidal", w)
        for kind in ("rope", "alibi"):
            want = _tost([held(kind, w)[s] - base[s] for s in SEEDS], m=6)
            assert float(rows[(kind, w)]["tost_p_adj"]) == pytest.approx(want["p_adj"], rel=1e-6), (kind, w)
            assert rows[(kind, w)]["equivalence"] == want["reading"], (kind, w)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "each seed at the optim.lr chosen on the size's other seeds" in md.split("\n")[2]
    assert "With tune=optim.lr the values at a size are the held-out ones" in md


@pytest.mark.parametrize("keys", [("tune=optim.lr",), ("scale=model.d_model",)], ids=["tune", "scale"])
def test_the_options_with_tune_or_scale_rebuild_from_the_reports_tables(tmp_path, cli_here, keys):
    """comparison.json keeps equivalence=, threshold= and last_k=: recompute= rebuilds every
    reading and each run's last-k spread, and a reading changed in report.csv is caught."""
    sweep = _tuned_sweep(tmp_path / "sweep")[0] if keys[0].startswith("tune") else _scaled_sweep(tmp_path / "sweep")
    _with_curves(sweep)
    out = tmp_path / "out"
    target = "2.95" if keys[0].startswith("tune") else "2.3"
    made = cli_here("compare", str(sweep), f"out={out}", *keys, "equivalence=0.02", f"threshold={target}", "last_k=4")
    assert made.returncode == 0, made.stderr
    spec = json.loads((out / "comparison.json").read_text())
    assert (spec["equivalence"], spec["threshold"], spec["last_k"]) == (0.02, float(target), 4)
    again = cli_here("compare", f"recompute={out}")
    assert again.returncode == 0 and "every value equals the report" in again.stdout, again.stdout
    text = (out / "report.csv").read_text().replace("cannot tell", "equivalent")
    (out / "report.csv").write_text(text)
    changed = cli_here("compare", f"recompute={out}")
    assert changed.returncode == 1 and "equivalence: report equivalent, rebuilt cannot tell: DIFFERS" in changed.stdout
