"""One family per report, the verdict it opens with, every pair on request (pairs=all), the
throughput flag and the model's shape among the settings held fixed; SciPy's paired t-test and
t quantile are the reference for the p-values and adjusted intervals."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compare.sweeps import write_sweep

stats = pytest.importorskip("scipy.stats", reason="SciPy is the reference for the tests and intervals")

NOISE = {0: 0.0, 1: 0.011, 2: -0.008, 3: 0.004}
SHAPE = {"model.d_model": 48, "model.n_layers": 3, "model.n_heads": 6, "model.d_ff": 96}


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _sweep(root: Path, arms: dict[str, callable]) -> Path:
    runs = [
        ({"model.position.kind": kind, **SHAPE, "seed": seed}, value(seed, noise))
        for kind, value in arms.items()
        for seed, noise in NOISE.items()
    ]
    return write_sweep(root, runs)


def _holm(ps: list[float]) -> list[float]:
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def _clear(root: Path) -> Path:
    """rope clearly better than sinusoidal (the baseline), alibi between them and noisier."""
    return _sweep(
        root,
        {
            "sinusoidal": lambda s, n: 3.0 + n,
            "rope": lambda s, n: 2.9 + n + 0.002 * s,
            "alibi": lambda s, n: 2.96 + 1.5 * n - 0.003 * s,
        },
    )


def test_the_family_is_declared_and_its_intervals_adjusted(tmp_path):
    from zoo.compare.report import compare

    sweep = _clear(tmp_path / "sweep")
    compare([sweep], tmp_path / "out", plots=False)
    rows = _rows(tmp_path / "out" / "report.csv")
    base = [3.0 + n for n in NOISE.values()]
    arms = {
        "rope": [2.9 + n + 0.002 * s for s, n in NOISE.items()],
        "alibi": [2.96 + 1.5 * n - 0.003 * s for s, n in NOISE.items()],
    }
    ps = [float(stats.ttest_rel(arms[k], base).pvalue) for k in ("rope", "alibi")]
    t = float(stats.t.ppf(1 - 0.05 / 4, len(base) - 1))  # 2 comparisons: each at 97.5%
    for row, kind, p, p_holm in zip(rows[1:], ("rope", "alibi"), ps, _holm(ps)):
        deltas = [a - b for a, b in zip(arms[kind], base)]
        mean = sum(deltas) / len(deltas)
        sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / (len(deltas) - 1))
        half = t * sd / math.sqrt(len(deltas))
        assert float(row["adj_low"]) == pytest.approx(mean - half, rel=1e-5)
        assert float(row["adj_high"]) == pytest.approx(mean + half, rel=1e-5)
        assert float(row["p"]) == pytest.approx(p, rel=1e-4) and float(row["p_holm"]) == pytest.approx(p_holm, rel=1e-4)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Multiplicity: one family of 2 comparisons, the 2 arm(s) other than the baseline, each against" in md
    assert "97.50% level (Bonferroni" in md
    title, blank, first = md.splitlines()[:3]
    assert title.startswith("# ") and not blank
    assert first.startswith("Verdict: arm 1 (model.position.kind=rope) has the lowest mean final val/loss")
    assert "the data favour it" in first and "pairs=all compares every pair" in first
    assert "below arm 0 (model.position.kind=sinusoidal) (the baseline)" in first  # the one it is compared with


def test_an_arm_identical_to_the_baseline_is_left_out_of_the_family(tmp_path):
    from zoo.compare.report import compare

    sweep = _sweep(
        tmp_path / "sweep",
        {
            "sinusoidal": lambda s, n: 3.0 + n,
            "learned": lambda s, n: 3.0 + n,
            "rope": lambda s, n: 2.95 + n + 0.003 * s,
        },
    )
    report = compare([sweep], tmp_path / "out", plots=False)
    assert report.family.m == 1 and [name for name, _ in report.family.left_out] == [
        "arm 1 (model.position.kind=learned)"
    ]
    md = (tmp_path / "out" / "report.md").read_text()
    assert "1 comparison with a test, so nothing is adjusted" in md
    assert "Left out of the family (no test): arm 1 (model.position.kind=learned) (zero spread" in md
    rows = _rows(tmp_path / "out" / "report.csv")
    assert rows[1]["p_holm"] == "" and rows[1]["adj_low"] == "" and rows[2]["p_holm"] == ""
    # the one test is not adjusted: its adjusted interval is its interval
    assert float(rows[2]["adj_low"]) == pytest.approx(float(rows[2]["ci_low"]))
    assert md.splitlines()[2].startswith("Verdict: arm 2 (model.position.kind=rope) has the lowest mean final")


def test_pairs_all_compares_every_pair_in_one_family(tmp_path):
    from zoo.compare.recompute import recompute
    from zoo.compare.report import compare

    sweep = _clear(tmp_path / "sweep")
    report = compare([sweep], tmp_path / "out", plots=False, pairs=True)
    pairs = _rows(tmp_path / "out" / "pairs.csv")
    assert [(r["arm"], r["other"]) for r in pairs] == [("arm 1", "arm 0"), ("arm 2", "arm 0"), ("arm 2", "arm 1")]
    values = {a.name: [a.finals("val/loss")[s] for s in NOISE] for a in report.arms}
    ps = [float(stats.ttest_rel(values[r["arm"]], values[r["other"]]).pvalue) for r in pairs]
    for row, p_holm in zip(pairs, _holm(ps)):
        assert float(row["p_holm"]) == pytest.approx(p_holm, rel=1e-4)
    t3 = float(stats.t.ppf(1 - 0.05 / 6, 3))  # 3 pairs: each at 1 − 0.05/3
    deltas = [a - b for a, b in zip(values["arm 2"], values["arm 1"])]
    mean = sum(deltas) / 4
    sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / 3)
    assert float(pairs[2]["adj_high"]) == pytest.approx(mean + t3 * sd / 2, rel=1e-5)
    report_rows = _rows(tmp_path / "out" / "report.csv")  # the baseline column is adjusted in the same family
    assert float(report_rows[1]["p_holm"]) == pytest.approx(float(pairs[0]["p_holm"]))
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Every pair" in md and "one family of 3 comparisons, every pair of the 3 arms" in md
    assert "against every other arm exclude zero" in md.splitlines()[2]
    assert json.loads((tmp_path / "out" / "comparison.json").read_text())["pairs"] is True
    lines, equal = recompute(tmp_path / "out")
    assert equal, [x for x in lines if "DIFFERS" in x]
    assert any(x.startswith("pairs.csv arm 2 arm 1 p_holm") for x in lines)


def test_a_tuned_report_opens_with_its_verdict_and_takes_pairs(tmp_path):
    from zoo.compare.tune import compare_tuned

    runs = []
    for kind, shift in (("sinusoidal", 0.0), ("rope", -0.003), ("alibi", 0.002)):
        for lr, extra in ((1e-3, 0.2), (3e-3, 0.0)):
            for seed, noise in NOISE.items():
                runs.append(
                    (
                        {"model.position.kind": kind, "optim.lr": lr, "seed": seed},
                        3.0 + shift + extra + noise * (1 + 0.5 * (kind == "rope") * seed),
                    )
                )
    compare_tuned([write_sweep(tmp_path / "sweep", runs)], tmp_path / "out", key="optim.lr", plots=False, pairs=True)
    md = (tmp_path / "out" / "report.md").read_text()
    first = md.splitlines()[2]
    assert first.startswith("Verdict: arm 1 (model.position.kind=rope) has the lowest mean held-out val/loss")
    assert "The data cannot tell it from" in first
    assert len(_rows(tmp_path / "out" / "pairs.csv")) == 3 and "Multiplicity: " in md


def test_throughput_that_varies_within_an_arm_is_flagged(tmp_path):
    from zoo.compare.report import compare

    sweep = _clear(tmp_path / "sweep")
    for job in sorted(sweep.iterdir(), key=lambda p: int(p.name)):
        summary = json.loads((job / "summary.json").read_text())
        summary["tokens_per_s"] = 1000.0 * (1 + int(job.name) % 4)  # each arm's seeds: 1000 to 4000
        (job / "summary.json").write_text(json.dumps(summary))
    report = compare([sweep], tmp_path / "out", plots=False)
    assert report.load
    assert any(w.startswith("tokens/s varies within an arm comparably to between arms") for w in report.warnings)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "tokens/s (logged wall-clock, machine load †)" in md and "† tokens/s varies" in md


def test_throughput_that_follows_the_arm_is_not_flagged(tmp_path):
    from zoo.compare.report import compare

    sweep = _clear(tmp_path / "sweep")
    for job in sweep.iterdir():
        summary = json.loads((job / "summary.json").read_text())
        summary["tokens_per_s"] = 1000.0 * (1 + int(job.name) // 4) + int(job.name) % 4  # by arm, ±3 by seed
        (job / "summary.json").write_text(json.dumps(summary))
    report = compare([sweep], tmp_path / "out", plots=False)
    md = (tmp_path / "out" / "report.md").read_text()
    assert report.load == "" and "machine load" not in md
    # still logged one run after another, and said so in the header and a sentence
    assert "| tokens/s (logged wall-clock) |" in md and "not measured interleaved" in md


def test_the_load_flag_fires_when_the_within_arm_spread_is_comparable_to_the_between_arm_one():
    """The rule: the largest within-arm standard deviation at least half the standard deviation
    of the arm means. The case a study missed: within 1,030 against between 1,176 (an arm then
    looked 2.6 to 4 times slower than zoo-bench measured it) fires; within a tenth of between does not."""
    from zoo.compare.stats import mean_std
    from zoo.compare.verdict import LOAD_RATIO, load_flag

    spread = 1030 * math.sqrt(2)  # two values ± spread/2 have a standard deviation of 1,030
    centres = [5000.0, 5000.0 + 1176 * math.sqrt(2)]  # two means 1,176·√2 apart: a standard deviation of 1,176
    arms = [[c - spread / 2, c + spread / 2] for c in centres]
    assert mean_std(arms[0])[1] == pytest.approx(1030) and mean_std(centres)[1] == pytest.approx(1176)
    assert LOAD_RATIO == 0.5 and "1,030" in load_flag(arms) and "1,176" in load_flag(arms)
    quiet = [[c - 117.6 / math.sqrt(2), c + 117.6 / math.sqrt(2)] for c in centres]  # within 117.6: a tenth
    assert load_flag(quiet) == ""
    edge = 0.5 * 1176  # exactly half: fires; just under: does not
    assert load_flag([[c - edge / math.sqrt(2) * 1.0001, c + edge / math.sqrt(2) * 1.0001] for c in centres])
    assert not load_flag([[c - edge / math.sqrt(2) * 0.999, c + edge / math.sqrt(2) * 0.999] for c in centres])


def test_held_fixed_includes_the_model_shape(tmp_path):
    from zoo.compare.report import compare

    compare([_clear(tmp_path / "sweep")], tmp_path / "out", plots=False)
    held = next(x for x in (tmp_path / "out" / "report.md").read_text().splitlines() if x.startswith("Held fixed:"))
    for key, value in SHAPE.items():
        assert f"`{key}={value}`" in held
    assert "vocabulary V = 256" in held


def test_a_scaled_report_adjusts_its_multipliers_as_one_family(tmp_path):
    from zoo.compare.multipliers import BOX, family_box, multiplier_interval
    from zoo.compare.scale import compare_scaled

    runs = []
    for act, shift in (("gelu", 0.04), ("swiglu", 0.0), ("relu", 0.06)):
        for width, loss in ((16, 4.4), (32, 4.0), (64, 3.7)):
            for seed, noise in NOISE.items():
                runs.append(
                    (
                        {"model.activation": act, "model.d_model": width, "seed": seed},
                        loss + shift + noise * (1 + 0.2 * seed * (act != "gelu")),
                    )
                )
    sweep = write_sweep(tmp_path / "sweep", runs, flops=lambda c: 1000 * c["model.d_model"])
    report = compare_scaled([sweep], tmp_path / "out", key="model.d_model", plots=False)
    assert report.family == 6  # 2 arms × 3 sizes, each with an interval
    base = report.baseline
    arm = report.arms[1]
    b = (base.fit.b * 0.9, base.fit.b * 1.1)  # any exponent range: the adjusted level is the wider
    size, own = arm.scored[-1], base.scored[-1]
    narrow = multiplier_interval(*b, base.fit.e, own, size, level=BOX)
    wide = multiplier_interval(*b, base.fit.e, own, size, level=family_box(6))
    assert wide[0] < narrow[0] and wide[1] > narrow[1] and family_box(6) == pytest.approx(1 - 0.05 / 12)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Multiplicity: one family of 6 comparisons, every compute multiplier with an interval" in md
    assert "99.17% level" in md and md.splitlines()[2].startswith("Verdict: at the largest size every arm reached")


@pytest.mark.slow  # starts a Python process that imports zoo
def test_pairs_takes_all_only_and_not_with_scale(tmp_path):
    sweep = _clear(tmp_path / "sweep")
    for args, says in (
        (["pairs=some"], "pairs=some: the only value is pairs=all"),
        (["pairs=all", "scale=model.d_model"], "pairs=all and scale=model.d_model cannot be combined"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "zoo.cli.compare", str(sweep), *args], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 2 and says in result.stderr and len(result.stderr.strip().splitlines()) == 1
