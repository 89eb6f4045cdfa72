"""Power and design (`zoo.compare.power`, `zoo-compare plan=`): the power formula against known
cases (Cohen 1988's table of seeds per group, the normal limit of the noncentral t) and against a
simulation (normal data at the computed seeds, rejected by SciPy's own t-tests at the computed
rate); the power sentence of a report from the spread its seeds show; plan= on a pilot sweep and
its refusals on one line."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from tests.compare.sweeps import write_sweep
from zoo.compare.power import Design, detectable, pooled_sd, power, seeds_for, seeds_for_equivalence

SIMULATIONS = 4000


@pytest.mark.parametrize(("d", "n"), [(0.5, 64), (0.8, 26)])
def test_seeds_per_group_match_cohens_table(d, n):
    """Cohen (1988), Table 2.4.1, two-sided α = 0.05, power 0.80: a standardised difference d
    needs n per group (two independent groups)."""
    assert seeds_for(d, 1.0, paired=False) == n
    assert power(d, 1.0, n, paired=False) >= 0.8 > power(d, 1.0, n - 1, paired=False)


@pytest.mark.parametrize("paired", [False, True])
def test_with_many_seeds_the_power_is_the_normal_limit(paired):
    """For large n the noncentral t is the normal: power = Φ(ncp − z) + Φ(−ncp − z), z = Φ⁻¹(0.975)."""
    n, sd, delta = 4000, 1.0, 0.06
    ncp = delta / (sd * math.sqrt((1 if paired else 2) / n))
    z = stats.norm.ppf(0.975)
    assert power(delta, sd, n, paired) == pytest.approx(stats.norm.cdf(ncp - z) + stats.norm.cdf(-ncp - z), abs=2e-3)


def _rejections(rng: np.random.Generator, delta: float, sd: float, n: int, paired: bool) -> float:
    """The share of SIMULATIONS experiments (n seeds per arm, normal noise) SciPy's t-test rejects at 0.05."""
    if paired:
        differences = delta + sd * rng.standard_normal((SIMULATIONS, n))
        p = stats.ttest_1samp(differences, 0.0, axis=1).pvalue
    else:
        a = sd * rng.standard_normal((SIMULATIONS, n))
        b = delta + sd * rng.standard_normal((SIMULATIONS, n))
        p = stats.ttest_ind(b, a, axis=1).pvalue
    return float(np.mean(p < 0.05))


@pytest.mark.parametrize("paired", [False, True])
def test_a_simulation_at_the_computed_seeds_rejects_at_the_computed_rate(paired):
    rng = np.random.default_rng(0)
    sd, delta = 0.03, 0.05
    n = seeds_for(delta, sd, paired)
    assert n is not None and power(delta, sd, n, paired) >= 0.8 > power(delta, sd, n - 1, paired)
    tolerance = 3.5 * math.sqrt(0.8 * 0.2 / SIMULATIONS)  # about 0.022
    assert _rejections(rng, delta, sd, n, paired) == pytest.approx(power(delta, sd, n, paired), abs=tolerance)
    smallest = detectable(sd, 3, paired)  # the design of 3 seeds: found 80% of the time
    assert power(smallest, sd, 3, paired) == pytest.approx(0.8, abs=1e-9)
    assert _rejections(rng, smallest, sd, 3, paired) == pytest.approx(0.8, abs=tolerance)


def test_equivalence_seeds_show_equivalence_about_as_often_as_planned():
    """Two one-sided tests at 0.05 with the seeds planned for a margin, true difference 0: the
    approximation plans for 80%, and exceeds it a little (it rounds up to whole seeds)."""
    rng = np.random.default_rng(1)
    sd, margin = 1.0, 0.5
    n = seeds_for_equivalence(margin, sd, paired=False)
    assert n == 70
    a, b = rng.standard_normal((SIMULATIONS, n)), rng.standard_normal((SIMULATIONS, n))
    diff = b.mean(axis=1) - a.mean(axis=1)
    se = np.sqrt(a.var(axis=1, ddof=1) / n + b.var(axis=1, ddof=1) / n)
    t = stats.t.ppf(0.95, 2 * n - 2)
    shown = np.mean((diff - t * se > -margin) & (diff + t * se < margin))
    assert 0.78 < shown < 0.86


def _plain_sweep(tmp_path, seeds=(0, 1, 2, 3)):
    """Two arms, the same seeds: post-LN 0.01 above pre-LN, with seed noise they share and noise
    of post-LN's own that hides the difference."""
    runs = []
    for norm, shift in (("pre", 0.0), ("post", 0.01)):
        for seed in seeds:
            own = 0.03 * ((seed * 3) % 4) - 0.045 if norm == "post" else 0.0
            loss = 3.0 + shift + 0.02 * ((seed * 7) % 5) + own
            runs.append(({"model.norm": norm, "seed": seed}, loss))
    return write_sweep(tmp_path / "sweep", runs), runs


def test_a_report_states_what_its_design_could_detect(tmp_path, cli_here):
    sweep, runs = _plain_sweep(tmp_path)
    out = tmp_path / "report"
    assert cli_here("compare", str(sweep), f"out={out}").returncode == 0
    md = (out / "report.md").read_text()
    pre = [loss for config, loss in runs if config["model.norm"] == "pre"]
    post = [loss for config, loss in runs if config["model.norm"] == "post"]
    sd = math.sqrt((np.var(pre, ddof=1) + np.var(post, ddof=1)) / 2)  # equal seeds: the mean variance
    sd_d = float(np.std(np.subtract(post, pre), ddof=1))
    line = next(x for x in md.splitlines() if x.startswith("From the seeds' spread"))
    assert f"pooled within-arm σ = {sd:.4f} val/loss, 6 df" in line
    assert f"4 seeds per arm and the paired t-test over seeds (σ of the paired differences {sd_d:.4f})" in line
    assert f"detects a true difference of {detectable(sd_d, 4, True):.4f} with 80% probability" in line
    diff = float(np.mean(post) - np.mean(pre))
    assert stats.ttest_rel(post, pre).pvalue > 0.05  # unresolved, so the report says what it needs
    assert f"largest unresolved difference (arm 1, {diff:+.4f}) would need {seeds_for(diff, sd_d, True)} seeds" in line


def test_plan_prints_the_seeds_a_pilot_says_a_difference_needs(tmp_path, cli_here):
    sweep, runs = _plain_sweep(tmp_path)
    result = cli_here("compare", f"plan={sweep}", "delta=0.02", "margin=0.05")
    assert result.returncode == 0, result.stderr
    pre = {c["seed"]: v for c, v in runs if c["model.norm"] == "pre"}
    post = {c["seed"]: v for c, v in runs if c["model.norm"] == "post"}
    sd_d, _ = pooled_sd([[post[s] - pre[s] for s in pre]]) or (0, 0)
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Pilot: {sweep}: 2 arm(s), 4 seeds each (8 finished runs), val/loss.")
    assert f"σ of the paired differences {sd_d:.4g} (3 df)" in lines[1]
    n = seeds_for(0.02, sd_d, paired=True)
    assert re.search(rf"difference of 0\.02 .*: {n} seeds per arm;", lines[3]), lines[3]
    low = sd_d * math.sqrt(3 / stats.chi2.ppf(0.975, 3))
    assert f"over the spread's 95% interval [{low:.4g}, " in lines[3]
    equivalent = seeds_for_equivalence(0.05, sd_d, True)
    assert (
        f"within ±0.05 (two one-sided tests at α = 0.05, true difference 0, 80% probability): {equivalent} seeds"
        in lines[4]
    )


def assert_one_line(result, *fragments: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert all(f in lines[0] for f in fragments), lines[0]


def test_plan_refusals_are_one_line(tmp_path, cli_here):
    sweep, _ = _plain_sweep(tmp_path)
    single = write_sweep(tmp_path / "single", [({"model.norm": n, "seed": 0}, 3.0 + i) for i, n in enumerate("ab")])
    assert_one_line(cli_here("compare", f"plan={single}", "delta=0.1"), "no arm has 2 seeds with a spread")
    assert_one_line(cli_here("compare", f"plan={sweep}"), "give the difference to detect, delta=VALUE")
    assert_one_line(cli_here("compare", f"plan={sweep}", "delta=0"), "delta=0.0: give a positive difference")
    assert_one_line(cli_here("compare", "delta=0.1"), "give the pilot too, plan=PILOT_DIR")
    assert_one_line(cli_here("compare", f"plan={sweep}", "delta=0.1", "scale=model.d_model"), "not scale=")
    assert_one_line(cli_here("compare", f"plan={tmp_path / 'none'}", "delta=0.1"), "not a directory")


def test_two_paired_seeds_have_a_power_where_the_noncentral_t_gives_none():
    """With 1 degree of freedom SciPy's noncentral t is NaN at a large noncentrality: the power
    is then the integral over the spread's chi-square, which equals SciPy's where both exist."""
    from zoo.compare.power import _integrated

    crit = float(stats.t.ppf(0.975, 1))
    for ncp in (1.0, 5.0, 14.0):
        scipy_power = stats.nct.sf(crit, 1, ncp) + stats.nct.cdf(-crit, 1, ncp)
        assert _integrated(crit, 1, ncp) == pytest.approx(scipy_power, abs=1e-9)
    for ncp in range(100, 300, 10):  # SciPy 1.x gives NaN at some of these (120, 150), 1.0 at others
        delta = ncp * 1e-3 * math.sqrt(1 / 2)
        assert 0.99 < power(delta, 1e-3, 2, paired=True) <= 1.0, ncp
    powers = [power(d, 1e-3, 2, paired=True) for d in (0.001, 0.01, 0.05, 0.1)]
    assert powers == sorted(powers) and 0.99 < powers[-1] <= 1.0
    assert power(detectable(1e-3, 2, paired=True), 1e-3, 2, paired=True) == pytest.approx(0.8, abs=1e-9)


def test_an_unresolved_difference_above_the_detectable_one_is_not_said_to_need_the_seeds_it_has():
    """A difference the pooled spread says the seeds would detect, left unresolved by its own
    arm's wider spread, is named as that, not as needing the seeds the design already has."""
    found = Design(0.02, 14, True, 0.017, 3, detectable(0.017, 3, True), 0.074, "arm 1")
    found.needed = seeds_for(0.074, 0.017, True)
    assert found.needed is not None and found.needed <= 3
    line = found.sentence("val/loss")
    assert "would need" not in line
    assert "(arm 1, +0.0740) is above that: at the pooled spread 3 seeds would detect it" in line
    assert found.needed_cell() == f"{found.needed}: σ understates its own spread"  # a scaled report's table
    found.needed = 5
    assert "would need 5 seeds per arm" in found.sentence("val/loss")
    assert found.needed_cell() == "5"
