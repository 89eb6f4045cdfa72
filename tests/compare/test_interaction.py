"""zoo.compare.interaction: the change of an arm's difference to the baseline from a smaller size
to the largest, against SciPy's Welch test (paired seeds) and the Welch–Satterthwaite formula
worked here (unpaired seeds), its family, and the section a scaled report writes."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from tests.compare.sweeps import write_sweep
from zoo.compare.interaction import change_between, changes
from zoo.compare.scaled_arms import ScaledArm, Size
from zoo.compare.stats import mean_std


def _size(width: int, by_seed: dict) -> Size:
    finals = list(by_seed.values())
    mean, std = mean_std(finals)
    return Size(value=width, runs=[], compute=1e9 * width, mean=mean, std=std, finals=finals, by_seed=dict(by_seed))


def _arm(name: str, by_width: dict[int, dict]) -> ScaledArm:
    return ScaledArm(name=name, runs=[], sizes=[_size(w, v) for w, v in by_width.items()])


BASE = {64: {0: 2.00, 1: 2.04, 2: 1.98}, 128: {0: 1.80, 1: 1.83, 2: 1.79}}
ARM = {64: {0: 1.95, 1: 2.00, 2: 1.91}, 128: {0: 1.70, 1: 1.76, 2: 1.66}}


def test_paired_seeds_give_scipys_welch_test_of_the_per_seed_differences():
    base, arm = _arm("arm 0", BASE), _arm("arm 1", ARM)
    found = change_between(arm.sizes[0], base.sizes[0], arm.sizes[1], base.sizes[1])
    small = [ARM[64][s] - BASE[64][s] for s in range(3)]
    large = [ARM[128][s] - BASE[128][s] for s in range(3)]
    test = stats.ttest_ind(large, small, equal_var=False)
    ci = test.confidence_interval(0.95)
    assert found.mean == pytest.approx(sum(large) / 3 - sum(small) / 3, abs=1e-12)
    assert (found.low, found.high) == (pytest.approx(ci.low, abs=1e-10), pytest.approx(ci.high, abs=1e-10))
    assert found.p == pytest.approx(test.pvalue, abs=1e-10) and found.df == pytest.approx(test.df)


def test_unpaired_seeds_add_the_four_variances_with_satterthwaites_degrees_of_freedom():
    base = _arm("arm 0", {64: {0: 2.0, 1: 2.1, 2: 1.9}, 128: {0: 1.8, 1: 1.7}})
    arm = _arm("arm 1", {64: {3: 1.9, 4: 2.05, 5: 1.85, 6: 1.95}, 128: {3: 1.6, 4: 1.65, 5: 1.5}})
    found = change_between(arm.sizes[0], base.sizes[0], arm.sizes[1], base.sizes[1])
    groups = [[1.9, 2.05, 1.85, 1.95], [2.0, 2.1, 1.9], [1.6, 1.65, 1.5], [1.8, 1.7]]
    var = [sum((x - sum(g) / len(g)) ** 2 for x in g) / (len(g) - 1) / len(g) for g in groups]  # s²/n
    se = math.sqrt(sum(var))
    df = sum(var) ** 2 / sum(v**2 / (len(g) - 1) for v, g in zip(var, groups))
    mean = (sum(groups[2]) / 3 - sum(groups[3]) / 2) - (sum(groups[0]) / 4 - sum(groups[1]) / 3)
    half = stats.t.ppf(0.975, df) * se
    assert found.method == "welch" and found.df == pytest.approx(df)
    assert found.p == pytest.approx(2 * stats.t.sf(abs(mean) / se, df))
    assert (found.mean, found.low, found.high) == (
        pytest.approx(mean),
        pytest.approx(mean - half),
        pytest.approx(mean + half),
    )


def test_one_seed_on_a_side_has_no_interval_and_is_left_out_of_the_family():
    base = _arm("arm 0", {64: {0: 2.0}, 128: {0: 1.8}})
    arm = _arm("arm 1", {64: {0: 1.9}, 128: {0: 1.6}})
    found = changes([base, arm], base, "model.d_model")
    assert found is not None and found.family.m == 0 and found.rows[0].change.low is None
    assert found.rows[0].change.mean == pytest.approx(-0.1)
    assert "fewer than 2 seeds" in found.family.sentence()


def test_every_arm_and_smaller_size_is_one_family_against_the_largest():
    widths = {32: 0.0, 64: 0.02, 128: 0.05}  # the arm's gain grows with width
    base = _arm("arm 0", {w: {s: 3.0 - w / 100 + 0.01 * s for s in range(3)} for w in widths})
    arm = _arm("arm 1", {w: {s: 3.0 - w / 100 - g + 0.013 * s for s in range(3)} for w, g in widths.items()})
    same = _arm("arm 2", {w: {s: 3.0 - w / 100 + 0.011 * s for s in range(3)} for w in widths})
    found = changes([base, arm, same], base, "model.d_model")
    assert [(c.arm, c.size, c.largest) for c in found.rows] == [
        ("arm 1", 32, 128),
        ("arm 1", 64, 128),
        ("arm 2", 32, 128),
        ("arm 2", 64, 128),
    ]
    assert found.family.m == 4
    grows = found.rows[0].change
    assert grows.mean == pytest.approx(-0.05) and grows.adj_high < 0 and grows.p_holm < 0.05
    assert all(c.change.adj_low < 0 < c.change.adj_high for c in found.rows[2:])
    assert changes([base, _arm("arm 1", {32: ARM[64]})], base, "model.d_model") is None  # one shared size


def test_a_scaled_report_has_the_section_and_recompute_checks_it(tmp_path, cli_here):
    runs = []
    for norm, gain in (("pre", {32: 0.0, 64: 0.0}), ("post", {32: 0.02, 64: 0.08})):
        for width in (32, 64):
            for seed in (0, 1, 2):
                loss = (
                    3.0 - width / 100 - gain[width] + 0.01 * ((seed * 7 + width) % 3) + 0.003 * seed * (norm == "post")
                )
                runs.append(({"model.norm": norm, "model.d_model": width, "seed": seed}, loss))
    sweep, out = write_sweep(tmp_path / "sweep", runs, flops=lambda c: 2 * c["model.d_model"] ** 2), tmp_path / "out"
    result = cli_here("compare", str(sweep), f"out={out}", "scale=model.d_model")
    assert result.returncode == 0, result.stderr[-3000:]
    md = (out / "report.md").read_text()
    assert "## Does each difference change with size" in md
    row = next(line for line in md.splitlines() if line.startswith("| arm 1 (model.norm=post) | `32` |"))
    assert "| -0.0170 | `64` | -0.0770 | -0.0600 [" in row  # gains 0.02, 0.08 less post's 0.003 · seed
    again = cli_here("compare", f"recompute={out}")
    assert again.returncode == 0 and "every value equals the report" in again.stdout, again.stdout[-3000:]
    (out / "report.md").write_text(md.replace("| -0.0600 [", "| -0.0500 [", 1))
    changed = cli_here("compare", f"recompute={out}")
    assert changed.returncode == 1 and "DIFFERS" in changed.stdout


def test_a_size_paired_and_one_not_add_their_own_variances():
    base = _arm("arm 0", {64: BASE[64], 128: {5: 1.8, 6: 1.7, 7: 1.75}})
    arm = _arm("arm 1", {64: ARM[64], 128: {8: 1.6, 9: 1.65}})
    found = change_between(arm.sizes[0], base.sizes[0], arm.sizes[1], base.sizes[1])
    small = [ARM[64][s] - BASE[64][s] for s in range(3)]  # paired at 64: one part
    parts = [(mean_std(small)[1] ** 2, 3), (mean_std([1.6, 1.65])[1] ** 2, 2), (mean_std([1.8, 1.7, 1.75])[1] ** 2, 3)]
    se2 = sum(v / n for v, n in parts)
    df = se2**2 / sum((v / n) ** 2 / (n - 1) for v, n in parts)
    assert found.mean == pytest.approx((1.625 - 1.75) - sum(small) / 3) and found.df == pytest.approx(df)
    assert found.high - found.low == pytest.approx(2 * stats.t.ppf(0.975, df) * math.sqrt(se2))


def test_a_difference_the_same_on_every_seed_has_no_interval_and_says_why():
    base = _arm("arm 0", BASE)
    arm = _arm("arm 1", {w: {s: v - 0.1 for s, v in seeds.items()} for w, seeds in BASE.items()})
    found = changes([base, arm], base, "model.d_model")
    change = found.rows[0].change
    assert change.low is None and change.p is None and change.mean == pytest.approx(0.0, abs=1e-12)
    assert found.family.m == 0 and "the same on every seed at both sizes" in found.family.sentence()
