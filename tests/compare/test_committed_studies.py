"""The committed studies in reports/ recompute, to the 4 decimals their reports print, from the
columns of their own report.csv: they were written before runs.csv existed, so no interval can
be rebuilt from per-seed values (`test_recompute.py`), but what a row holds ties its numbers
together. A paired row's interval follows from its difference, degrees of freedom and p-value
(both come from one t statistic); its Holm p-value from the report's p-values; a scaled report's
power law, residuals, fit interval and compute multipliers from each arm's compute and mean loss.
The t distribution and the fit behind them changed implementation (SciPy's, for the ones these
reports were written with); a change that moves a committed number fails here."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from zoo.compare.multipliers import multiplier
from zoo.compare.powerlaw import TooFewPoints, fit_power_law
from zoo.compare.stats import Difference, holm, t_quantile

REPORTS = Path(__file__).resolve().parents[2] / "reports"
STUDIES = sorted(p.relative_to(REPORTS) for p in REPORTS.rglob("report.csv"))
FOUR = 5e-5  # half a unit in the 4th decimal
SIZE = "model.d_model"


def _rows(study: Path) -> list[dict]:
    with (REPORTS / study).open(newline="") as handle:
        return list(csv.DictReader(handle))


def _number(cell: str) -> float | None:
    return float(cell) if cell not in ("", None) else None


def _tested(rows: list[dict]) -> list[dict]:
    return [r for r in rows if _number(r.get("p")) is not None]


PAIRED = [s for s in STUDIES if _tested(_rows(s))]
SCALED = [s for s in STUDIES if "exponent" in _rows(s)[0]]


def test_every_committed_study_with_a_test_or_a_fit_is_checked_here():
    """The reports left out hold a difference and its interval only (no degrees of freedom, no
    p-value, no fit): nothing in them ties one number to another."""
    for study in set(STUDIES) - set(PAIRED) - set(SCALED):
        assert not {"p", "df", "exponent"} & set(_rows(study)[0]), study
    assert len(PAIRED) >= 5 and SCALED


@pytest.mark.parametrize("study", PAIRED, ids=str)
def test_each_paired_interval_follows_from_its_p_value(study):
    """|diff| / se is the t statistic whose two-sided p-value the row gives, and the interval is
    diff ± t(0.975, df) · se: one t distribution behind both columns."""
    rows = [r for r in _tested(_rows(study)) if float(r["ci_low"]) != float(r["ci_high"])]
    for row in rows:
        diff, p, df = float(row["diff"]), float(row["p"]), float(row["df"])
        se = abs(diff) / t_quantile(1 - p / 2, df)
        half = t_quantile(0.975, df) * se
        assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx((diff - half, diff + half), abs=FOUR), (
            study,
            row["arm"],
        )


@pytest.mark.parametrize("study", PAIRED, ids=str)
def test_each_holm_p_value_follows_from_the_reports_p_values(study):
    """Holm's step-down over the report's family: the arms against the baseline, or every pair
    (pairs.csv) in a report made with pairs=all, whose rows against the baseline are pairs too."""
    pairs = REPORTS / study.parent / "pairs.csv"
    rows = [r for r in _tested(_rows(study.parent / "pairs.csv" if pairs.is_file() else study)) if "p_holm" in r]
    if pairs.is_file():
        by_pair = {(r["arm"], r["other"]): r for r in rows}
        baseline = next(r["arm"] for r in _rows(study) if r["arm"].endswith("(baseline)")).removesuffix(" (baseline)")
        for row in _tested(_rows(study)):
            assert float(row["p_holm"]) == pytest.approx(float(by_pair[(row["arm"], baseline)]["p_holm"]), abs=FOUR)
    diffs = [Difference(float(r["diff"]), None, None, "paired", p=float(r["p"])) for r in rows]
    holm(diffs)
    for row, d in zip(rows, diffs):
        if len(rows) < 2:  # a family of one comparison: nothing to adjust, and no Holm column written
            assert d.p_holm is None and row["p_holm"] == "", (study, row["arm"])
            continue
        assert d.p_holm == pytest.approx(float(row["p_holm"]), abs=FOUR), (study, row["arm"])


@pytest.mark.parametrize("study", SCALED, ids=str)
def test_each_power_law_and_multiplier_follows_from_the_arms_means(study):
    """The fit of each arm's mean loss against compute, and each finite compute multiplier by the
    definition its report states (glu_scaling/first_run/ was written by the first one)."""
    rows = _rows(study)
    arms: dict[str, list[dict]] = {}
    for row in rows:
        arms.setdefault(row["arm"], []).append(row)
    if all(len({r["compute"] for r in sizes}) < 3 for sizes in arms.values()):
        # too few sizes to fit (hybrid/: two widths): the report says so on every row and gives
        # no exponent and no multiplier; its decisions across sizes are tested apart
        for sizes in arms.values():
            with pytest.raises(TooFewPoints):
                fit_power_law([float(r["compute"]) for r in sizes], [float(r["val/loss mean"]) for r in sizes])
            for row in sizes:
                assert "needs at least 3" in row["fit"] and not row["exponent"] and not row["multiplier"], row
        return
    fits = {}
    for name, sizes in arms.items():
        # the report fits e + a·C^-b where it has the points for it (3 parameters: df = sizes - 3)
        irreducible = bool(sizes[0].get("fit_df")) and int(sizes[0]["fit_df"]) == len(sizes) - 3
        law = fit_power_law(
            [float(r["compute"]) for r in sizes], [float(r["val/loss mean"]) for r in sizes], irreducible=irreducible
        )
        fits[name] = law
        for row in sizes:
            assert row["fit"] == str(law) and law.b == pytest.approx(float(row["exponent"]), abs=FOUR)
            if row.get("rmse_log"):
                assert law.rmse_log == pytest.approx(float(row["rmse_log"]), abs=FOUR)
                assert law.residual(float(row["compute"]), float(row["val/loss mean"])) == pytest.approx(
                    float(row["residual"]), abs=FOUR
                )
            if row.get("exponent_fit_low"):
                low, high = law.exponent_interval(0.95)
                assert (low, high) == pytest.approx(
                    (float(row["exponent_fit_low"]), float(row["exponent_fit_high"])), abs=FOUR
                ), (study, name)
    (base,) = [name for name in arms if name.endswith("(baseline)")]
    base_at = {r[SIZE]: r for r in arms[base]}
    checked = 0
    for name, sizes in arms.items():
        for row in sizes:
            if name == base or not row["multiplier"] or not math.isfinite(float(row["multiplier"])):
                continue
            own = base_at[row[SIZE]]
            if "rmse_log" in row:  # the baseline's curve through its own measured point
                m = multiplier(
                    fits[base].b,
                    fits[base].e,
                    float(own["val/loss mean"]),
                    float(own["compute"]),
                    float(row["val/loss mean"]),
                    float(row["compute"]),
                )
            else:  # the first version (first_run/): where the arm's own curve reaches the baseline's loss
                m = float(own["compute"]) / fits[name].compute_for(float(own["val/loss mean"]))
            assert m == pytest.approx(float(row["multiplier"]), abs=FOUR), (study, name, row[SIZE])
            checked += 1
    assert checked, study
