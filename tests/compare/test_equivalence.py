"""equivalence= (two one-sided tests: equivalent within ±M, different or cannot tell, on
constructed data, its p-values against SciPy's one-sided t-tests), threshold= (the speedrun's
one-sided p < 0.01 rule), and a verdict on fewer than 3 seeds saying so first."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from tests.compare.sweeps import write_sweep

stats = pytest.importorskip("scipy.stats", reason="SciPy is the reference for the one-sided tests")

NOISE = {0: 0.0, 1: 0.011, 2: -0.008, 3: 0.004}
WIDE = {0: 0.05, 1: -0.04, 2: 0.03, 3: -0.03}  # "learned": seeds far apart
ARMS = {
    "sinusoidal": lambda s, n: 3.0 + n,  # the baseline
    "rope": lambda s, n: 3.001 + n + 0.0005 * s,  # within ±0.02 of it, tightly
    "alibi": lambda s, n: 2.9 + n + 0.002 * s,  # 0.1 below it
    "learned": lambda s, n: 3.0 + n + WIDE[s],  # could be anywhere in ±0.05
}
MARGIN = 0.02


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _sweep(root: Path, arms: dict = ARMS, seeds: dict = NOISE) -> Path:
    runs = [
        ({"model.position.kind": kind, "model.d_model": 32, "seed": seed}, value(seed, noise))
        for kind, value in arms.items()
        for seed, noise in seeds.items()
    ]
    return write_sweep(root, runs)


def _values(kind: str) -> list[float]:
    return [ARMS[kind](s, n) for s, n in NOISE.items()]


def test_each_comparison_reads_equivalent_different_or_cannot_tell(tmp_path):
    from zoo.compare.report import compare

    report = compare([_sweep(tmp_path / "sweep")], tmp_path / "out", plots=False, equivalence=MARGIN)
    readings = {row["model.position.kind"]: row["equivalence"] for row in _rows(tmp_path / "out" / "report.csv")}
    assert readings == {"sinusoidal": "", "rope": "equivalent", "alibi": "different", "learned": "cannot tell"}
    md = (tmp_path / "out" / "report.md").read_text()
    opening = md.split("\n")[2]
    assert "Against the margin ±0.02 nats per token (two one-sided tests" in opening
    assert "equivalent within ±0.02" in opening and "different" in opening and "cannot tell" in opening
    assert "## Equivalence within ±0.02" in md and report.family is not None and report.family.m == 3


def test_the_tost_p_values_equal_scipys_one_sided_tests(tmp_path):
    """p (lower) tests Δ ≤ −M, p (upper) Δ ≥ +M, each one-sided on the paired differences; the
    report's TOST p-value is the larger, times the family's 3 comparisons; its interval is at
    1 − 2·0.05/3 and lies inside ±M exactly when that p is below 0.05."""
    from zoo.compare.report import compare

    compare([_sweep(tmp_path / "sweep")], tmp_path / "out", plots=False, equivalence=MARGIN)
    rows = {row["model.position.kind"]: row for row in _rows(tmp_path / "out" / "report.csv")}
    base = _values("sinusoidal")
    for kind in ("rope", "alibi", "learned"):
        d = [a - b for a, b in zip(_values(kind), base)]
        lower = stats.ttest_1samp([x + MARGIN for x in d], 0.0, alternative="greater").pvalue
        upper = stats.ttest_1samp([x - MARGIN for x in d], 0.0, alternative="less").pvalue
        row = rows[kind]
        assert float(row["tost_p"]) == pytest.approx(max(lower, upper), rel=1e-6)
        assert float(row["tost_p_adj"]) == pytest.approx(min(1.0, 3 * max(lower, upper)), rel=1e-6)
        mean, sd = sum(d) / 4, math.sqrt(sum((x - sum(d) / 4) ** 2 for x in d) / 3)
        half = stats.t.ppf(1 - 0.05 / 3, 3) * sd / 2
        assert (float(row["equiv_low"]), float(row["equiv_high"])) == pytest.approx((mean - half, mean + half))
        inside = -MARGIN < float(row["equiv_low"]) and float(row["equiv_high"]) < MARGIN
        assert inside == (float(row["tost_p_adj"]) < 0.05) == (row["equivalence"] == "equivalent")


def test_a_welch_difference_is_tested_by_welchs_one_sided_tests():
    """Arms on different seeds: the two one-sided tests are Welch's, shifted by the margin."""
    from zoo.compare.equivalence import tost
    from zoo.compare.stats import difference

    arm, base = {0: 1.01, 1: 1.0, 2: 1.02}, {5: 1.0, 6: 0.99, 7: 1.005, 8: 1.012}
    eq = tost(difference(arm, base), 0.05, 1)
    a, b = list(arm.values()), list(base.values())
    lower = stats.ttest_ind([x + 0.05 for x in a], b, equal_var=False, alternative="greater").pvalue
    upper = stats.ttest_ind([x - 0.05 for x in a], b, equal_var=False, alternative="less").pvalue
    assert (eq.p_lower, eq.p_upper) == pytest.approx((lower, upper), rel=1e-6)
    assert eq.level == pytest.approx(0.90) and eq.reading == "equivalent"


def test_without_a_margin_an_interval_spanning_zero_is_never_no_difference(tmp_path):
    from zoo.compare.report import compare

    arms = {"sinusoidal": ARMS["sinusoidal"], "learned": ARMS["learned"]}  # an interval across zero
    report = compare([_sweep(tmp_path / "sweep", arms)], tmp_path / "out", plots=False)
    diff = report.arms[1].diff
    assert diff is not None and diff.adj_low is not None and diff.adj_low < 0 < diff.adj_high
    md = (tmp_path / "out" / "report.md").read_text().lower()
    assert "the data cannot tell it from" in md.split("\n")[2]
    for words in ("no effect", "no difference between", "within noise", "equivalent"):
        assert words not in md, words


def test_a_margin_must_be_a_positive_number_and_the_other_keys_numbers_too(tmp_path, cli_here):
    sweep = _sweep(tmp_path / "sweep")
    for value in ("-0.1", "0", "tiny"):
        result = cli_here("compare", str(sweep), f"equivalence={value}")
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "equivalence=" in result.stderr
    for option in ("threshold=low", "last_k=2", "last_k=many"):
        result = cli_here("compare", str(sweep), option)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, option
        assert option.split("=")[0] + "=" in result.stderr, option


def test_threshold_is_the_speedruns_one_sided_rule(tmp_path):
    """Each arm's mean against the target, one-sided at p < 0.01, Holm over the arms tested."""
    from zoo.compare.report import compare

    target = 2.95
    compare([_sweep(tmp_path / "sweep")], tmp_path / "out", plots=False, threshold=target)
    rows = {row["model.position.kind"]: row for row in _rows(tmp_path / "out" / "report.csv")}
    ps = {k: stats.ttest_1samp(_values(k), target, alternative="less").pvalue for k in ARMS}
    order = sorted(ps, key=ps.get)
    running, holm = 0.0, {}
    for rank, kind in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * ps[kind]))
        holm[kind] = running
    for kind, row in rows.items():
        assert float(row["threshold_p"]) == pytest.approx(ps[kind], rel=1e-6)
        assert float(row["threshold_p_holm"]) == pytest.approx(holm[kind], rel=1e-6)
        assert row["reaches"] == ("yes" if holm[kind] < 0.01 else "no")
    assert rows["alibi"]["reaches"] == "yes" and rows["sinusoidal"]["reaches"] == "no"
    opening = (tmp_path / "out" / "report.md").read_text().split("\n")[2]
    assert "Threshold val/loss below 2.95 (one-sided t-test of each arm's mean, p &lt; 0.01" in opening
    assert "arm 2 shows its mean below it." in opening


def test_a_verdict_on_fewer_than_3_seeds_says_so_in_its_first_sentence(tmp_path):
    from zoo.compare.report import compare

    two = {0: 0.0, 1: 0.011}
    arms = {"sinusoidal": ARMS["sinusoidal"], "alibi": ARMS["alibi"]}
    compare([_sweep(tmp_path / "two", arms, two)], tmp_path / "out", plots=False)
    verdict = (tmp_path / "out" / "report.md").read_text().split("\n")[2]
    first = verdict.split(". ")[0]
    assert first.startswith("Verdict: on fewer than 3 seeds (arm 0: 2, arm 1: 2; ")
    assert "at most 1 degree of freedom per arm" in first and "lowest" in first
    compare([_sweep(tmp_path / "four", arms)], tmp_path / "out4", plots=False)
    assert "fewer than 3 seeds" not in (tmp_path / "out4" / "report.md").read_text()


def test_a_tuned_verdict_on_fewer_than_3_seeds_says_so_first(tmp_path):
    """Held out over 2 seeds: each seed is measured at the rate the other one chose."""
    from zoo.compare.tune import compare_tuned

    runs = [
        ({"model.position.kind": kind, "optim.lr": lr, "seed": seed}, 3.0 + shift + extra + 0.01 * seed)
        for kind, shift in (("sinusoidal", 0.0), ("alibi", -0.1))
        for lr, extra in ((1e-3, 0.2), (3e-3, 0.0))
        for seed in (0, 1)
    ]
    compare_tuned([write_sweep(tmp_path / "sweep", runs)], tmp_path / "out", key="optim.lr", plots=False)
    first = (tmp_path / "out" / "report.md").read_text().split("\n")[2].split(". ")[0]
    assert first.startswith("Verdict: on fewer than 3 seeds (arm 0: 2, arm 1: 2; ") and "held-out" in first


def test_a_report_with_a_margin_and_a_target_rebuilds_from_its_tables(tmp_path, cli_here):
    """comparison.json keeps equivalence= and threshold=: recompute= rebuilds every reading, and
    a reading changed in report.csv is caught."""
    sweep = _sweep(tmp_path / "sweep")
    out = tmp_path / "out"
    made = cli_here("compare", str(sweep), f"out={out}", "equivalence=0.02", "threshold=2.95", "pairs=all")
    assert made.returncode == 0, made.stderr
    spec = json.loads((out / "comparison.json").read_text())
    assert (spec["equivalence"], spec["threshold"]) == (0.02, 2.95)
    again = cli_here("compare", f"recompute={out}")
    assert again.returncode == 0 and "every value equals the report" in again.stdout, again.stdout
    text = (out / "report.csv").read_text().replace("cannot tell", "equivalent")
    (out / "report.csv").write_text(text)
    changed = cli_here("compare", f"recompute={out}")
    assert changed.returncode == 1 and "equivalence: report equivalent, rebuilt cannot tell: DIFFERS" in changed.stdout
