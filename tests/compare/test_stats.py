"""The statistics behind zoo-compare's intervals, against published t tables and the normal
limit from Python's standard library: SciPy computes them, these check that zoo asks it the
right question (the quantile of a two-sided 95% interval, the paired or Welch test, the sign of
arm − baseline)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from zoo.compare.stats import difference, mean_std, t_quantile


@pytest.mark.parametrize("df, expected", [(1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042)])
def test_t_quantiles_match_the_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_large_df_tends_to_the_normal_quantile():
    assert t_quantile(0.975, 1e6) == pytest.approx(statistics.NormalDist().inv_cdf(0.975), abs=1e-4)
    assert t_quantile(0.5, 7) == pytest.approx(0.0, abs=1e-12)
    assert t_quantile(0.025, 4) == pytest.approx(-t_quantile(0.975, 4))


def test_mean_std_is_the_sample_statistic():
    values = [1.0, 2.0, 4.0]
    assert mean_std(values) == pytest.approx((statistics.mean(values), statistics.stdev(values)))
    assert mean_std([3.0]) == (3.0, 0.0)


def test_paired_interval_when_the_seeds_match():
    base = {0: 5.0, 1: 5.2, 2: 4.9}
    arm = {0: 4.8, 1: 5.1, 2: 4.6}
    d = difference(arm, base)
    deltas = [-0.2, -0.1, -0.3]
    half = 4.303 * statistics.stdev(deltas) / math.sqrt(3)
    assert d.method == "paired"
    assert d.mean == pytest.approx(-0.2)
    assert (d.low, d.high) == pytest.approx((-0.2 - half, -0.2 + half), abs=1e-3)


def test_welch_interval_when_the_seeds_differ_and_none_for_one_seed():
    d = difference({0: 1.0, 1: 2.0, 2: 3.0}, {5: 0.0, 6: 1.0})
    assert d.method == "welch" and d.low < d.mean < d.high
    assert difference({0: 1.0}, {0: 2.0, 1: 3.0}).low is None


def test_welch_interval_on_a_worked_example():
    """Arms of 3 seeds each, no seed shared: means 2 and 5, sample variances 1 and 1, so each
    squared standard error is 1/3, the standard error sqrt(2/3), and Welch-Satterthwaite's degrees
    of freedom (2/3)^2 / ((1/3)^2/2 + (1/3)^2/2) = 4 exactly: t(0.975, 4) = 2.776445 (tables)."""
    d = difference({0: 4.0, 1: 5.0, 2: 6.0}, {3: 1.0, 4: 2.0, 5: 3.0})
    half = 2.776445 * math.sqrt(2 / 3)
    assert d.method == "welch"
    assert d.mean == pytest.approx(3.0)
    assert (d.low, d.high) == pytest.approx((3.0 - half, 3.0 + half), abs=1e-5)
    # unequal sizes: sample variances 1 (n=3) and 2 (n=2), so squared standard errors 1/3 and 1
    d = difference({0: 1.0, 1: 2.0, 2: 3.0}, {3: 0.0, 4: 2.0})
    va, vb = 1 / 3, 2 / 2  # s^2/n of each arm
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 1)  # 32/19
    assert df == pytest.approx(32 / 19)
    half = t_quantile(0.975, 32 / 19) * math.sqrt(va + vb)
    assert (d.low, d.high) == pytest.approx((1.0 - half, 1.0 + half), abs=1e-9)


@pytest.mark.slow
def test_the_95_percent_interval_covers_the_truth_about_95_percent_of_the_time():
    rng = random.Random(0)
    hits = 0
    trials = 400
    for _ in range(trials):
        arm = {s: rng.gauss(1.0, 0.5) for s in range(4)}
        base = {s + 10: rng.gauss(0.0, 0.3) for s in range(5)}
        d = difference(arm, base)
        hits += d.low <= 1.0 <= d.high
    assert 0.91 <= hits / trials <= 0.99


def _paired_with_t(t: float, df: int) -> tuple[dict, dict]:
    """An arm and a baseline on df + 1 shared seeds whose paired differences have mean t/sqrt(n)
    and standard deviation 1: the paired t statistic is t."""
    n = df + 1
    z = [i - (n - 1) / 2 for i in range(n)]
    sd = statistics.stdev(z)
    return {s: 5.0 + t / math.sqrt(n) + z[s] / sd for s in range(n)}, {s: 5.0 for s in range(n)}


@pytest.mark.parametrize(
    "t, df, expected", [(12.706, 1, 0.05), (4.303, 2, 0.05), (2.776, 4, 0.05), (3.747, 4, 0.02), (0.0, 3, 1.0)]
)
def test_two_sided_p_values_match_the_table(t, df, expected):
    arm, base = _paired_with_t(t, df)
    d = difference(arm, base)
    assert d.method == "paired" and d.df == df
    assert d.p == pytest.approx(expected, abs=5e-4)
    assert difference(base, arm).p == pytest.approx(d.p)  # two-sided: the same either way round


def test_p_values_agree_with_scipys_t_tests():
    """The paired and Welch p-values against SciPy's own t-tests (code nobody here wrote)."""
    stats = pytest.importorskip("scipy.stats", reason="SciPy is the reference for the p-values")
    base, arm = {0: 5.0, 1: 5.2, 2: 4.9, 3: 5.05}, {0: 4.8, 1: 5.1, 2: 4.85, 3: 4.7}
    d = difference(arm, base)
    seeds = sorted(base)
    assert d.p == pytest.approx(stats.ttest_rel([arm[s] for s in seeds], [base[s] for s in seeds]).pvalue, rel=1e-3)
    assert d.df == 3
    other = {7: 4.6, 8: 4.9, 9: 5.0}
    w = difference(other, base)
    ref = stats.ttest_ind(list(other.values()), list(base.values()), equal_var=False)
    assert w.method == "welch" and w.p == pytest.approx(ref.pvalue, rel=1e-3)


def test_two_seeds_are_flagged_as_one_degree_of_freedom():
    d = difference({0: 4.8, 1: 5.1}, {0: 5.0, 1: 5.2})
    assert d.df == 1 and d.few_df and "(1 df)" in str(d)
    assert not difference({0: 4.8, 1: 5.1, 2: 4.9}, {0: 5.0, 1: 5.2, 2: 5.0}).few_df


def test_holm_adjusts_a_family_of_p_values():
    """Holm 1979 on p = (0.01, 0.04, 0.03, 0.005): sorted 0.005, 0.01, 0.03, 0.04 become
    4·0.005 = 0.02, 3·0.01 = 0.03, 2·0.03 = 0.06, max(0.06, 1·0.04) = 0.06."""
    from zoo.compare.stats import Difference, holm

    diffs = [Difference(0.0, None, None, "paired", p=p) for p in (0.01, 0.04, 0.03, 0.005)]
    holm([*diffs, None])
    assert [d.p_holm for d in diffs] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    single = [Difference(0.0, None, None, "paired", p=0.01)]
    holm(single)
    assert single[0].p_holm is None  # one comparison: nothing to adjust


def test_scipy_is_imported_only_inside_zoo_compares_functions():
    """SciPy's statistics take most of a second to import: no zoo module imports SciPy when it
    loads (zoo-train's start-up and `import zoo.compare` do not pay for it), and only zoo.compare
    imports it at all, in the functions that compute a test or a fit."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    users = set()
    for path in (root / "zoo").rglob("*.py"):
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "scipy" for n in names):
                rel = path.relative_to(root).as_posix()
                assert id(node) not in top, f"{rel}:{node.lineno} imports scipy when the module loads"
                users.add(rel)
    assert users and all(u.startswith("zoo/compare/") for u in users), users
