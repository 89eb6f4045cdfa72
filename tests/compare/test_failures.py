"""Failures count, on synthetic sweeps: a learning rate at which any seed diverged is failed for
tuning (never averaged over the seeds that survived it, and no seed is measured at it), in tune=
and in scale= tune=; every kind of report lists its runs without a final result; a difference
with zero spread or fewer than 2 seeds on a side is flagged and gets neither an interval nor a
p-value."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from tests.compare.sweeps import write_sweep
from zoo.compare.select import leave_one_seed_out
from zoo.compare.stats import FEW_SEEDS, ZERO_SPREAD, difference, estimate

RATES = (1e-3, 3e-3, 1e-2)


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_value_where_a_seed_failed_is_never_chosen_nor_measured():
    # lower is better; seed 2 diverged at the third value, where seeds 0 and 1 did best
    points = [{0: 4.2, 1: 4.21, 2: 4.22}, {0: 3.95, 1: 3.96, 2: 3.97}, {0: 3.80, 1: 3.81}]
    before = leave_one_seed_out(points, lower=True)  # without the failure known: the survivors' mean wins
    assert before.best == 2 and before.finals == {0: 3.80, 1: 3.81}
    choice = leave_one_seed_out(points, lower=True, failed=[False, False, True])
    assert choice.best == 1 and choice.failed == [2]
    assert choice.chosen == {0: 1, 1: 1, 2: 1} and choice.finals == {0: 3.95, 1: 3.96, 2: 3.97}
    assert leave_one_seed_out(points, lower=True, failed=[True, True, True]).best is None


def _issue_sweep(root: Path) -> Path:
    """The case of the review: arm `post` is best at 1e-2 on seeds 0 and 1, and seed 2 diverged
    there; the baseline `pre` is stable at every rate."""
    base = {1e-3: 4.10, 3e-3: 3.90, 1e-2: 4.00}
    post = {1e-3: 4.20, 3e-3: 3.95, 1e-2: 3.80}
    runs = []
    for norm, losses in (("pre", base), ("post", post)):
        for lr in RATES:
            for seed in (0, 1, 2):
                failed = norm == "post" and lr == 1e-2 and seed == 2
                noise = 0.003 * seed if norm == "pre" else 0.004 * seed + 0.001 * seed * seed
                runs.append(
                    ({"model.norm": norm, "optim.lr": lr, "seed": seed}, None if failed else losses[lr] + noise)
                )
    return write_sweep(root, runs)


def test_the_diverged_seed_at_the_chosen_rate_is_not_dropped(tmp_path):
    from zoo.compare.tune import compare_tuned

    sweep = _issue_sweep(tmp_path / "sweep")
    out = tmp_path / "report"
    report = compare_tuned([sweep], out, key="optim.lr", plots=False)
    base, post = _rows(out / "report.csv")
    assert post["model.norm"] == "post" and float(post["best optim.lr"]) == 3e-3  # 1e-2 is failed for tuning
    assert post["seeds"] == "3"
    held = {int(r["seed"]): float(r["val/loss"]) for r in _rows(out / "heldout.csv") if r["arm"] == "arm 1"}
    assert held == pytest.approx({s: 3.95 + 0.004 * s + 0.001 * s * s for s in (0, 1, 2)})  # all three seeds
    deltas = [0.05, 0.052, 0.056]  # paired over all 3 seeds: worse than the baseline, not −0.095 on 2
    assert float(post["diff"]) == pytest.approx(sum(deltas) / 3)
    assert post["flag"] == "" and 0 < float(post["ci_low"]) < float(post["ci_high"]) and float(post["p"]) < 0.05
    md = (out / "report.md").read_text()
    assert "## Runs without a final result" in md and "the training loss is nan at step 3" in md
    assert "(0.01 failed for tuning)" in md
    assert any("optim.lr=0.01 is failed for tuning: 1 of its 3 run(s)" in w for w in report.notes)


def test_a_scaled_report_tunes_each_size_without_its_failed_rates(tmp_path):
    from zoo.compare.scale import compare_scaled

    runs = []
    for width in (16, 32, 64):
        for lr in RATES:
            for seed in (0, 1, 2):
                loss = 4.0 - width / 100 + (0.0 if lr == 1e-2 else 0.1 + 0.05 * (lr == 1e-3)) + 0.01 * seed
                failed = width == 64 and lr == 1e-2 and seed == 1
                runs.append(({"model.d_model": width, "optim.lr": lr, "seed": seed}, None if failed else loss))
    sweep = write_sweep(
        tmp_path / "sweep", runs, flops=lambda c: 100 * c["model.d_model"], params=lambda c: 12 * c["model.d_model"]
    )
    out = tmp_path / "report"
    report = compare_scaled([sweep], out, key="model.d_model", tune="optim.lr", plots=False)
    rows = _rows(out / "report.csv")
    assert [float(r["best optim.lr"]) for r in rows] == [1e-2, 1e-2, 3e-3]  # 1e-2 failed at width 64
    assert rows[-1]["seeds"] == "3" and float(rows[-1]["val/loss mean"]) == pytest.approx(4.0 - 0.64 + 0.1 + 0.01)
    held = [r for r in _rows(out / "heldout.csv") if r["model.d_model"] == "64"]
    assert sorted(int(r["seed"]) for r in held) == [0, 1, 2] and {r["optim.lr"] for r in held} == {"0.003"}
    assert any("model.d_model=64: optim.lr=0.01 is failed for tuning" in w for w in report.warnings)
    md = (out / "report.md").read_text()
    assert "## Runs without a final result" in md and "failed: the training loss is nan" in md


def test_a_plain_report_flags_zero_spread_and_one_seed(tmp_path):
    from zoo.compare.report import compare

    runs = []
    for seed in (0, 1, 2):
        runs.append(({"model.norm": "pre", "model.mup": False, "seed": seed}, 4.0 + 0.01 * seed))
        runs.append(({"model.norm": "pre", "model.mup": True, "seed": seed}, 4.0 + 0.01 * seed))  # identical runs
        runs.append(({"model.norm": "post", "model.mup": False, "seed": seed}, None if seed else 4.5))  # one seed
        runs.append(({"model.norm": "sandwich", "model.mup": False, "seed": seed}, 4.1 + 0.01 * seed + 0.02 * seed**2))
    sweep = write_sweep(tmp_path / "sweep", runs)
    out = tmp_path / "report"
    report = compare([sweep], out, plots=False)
    base, same, one, real = _rows(out / "report.csv")
    assert (
        same["flag"] == ZERO_SPREAD and same["ci_low"] == same["ci_high"] == same["p"] == "" and same["diff"] == "0.0"
    )
    assert one["flag"] == FEW_SEEDS and one["ci_low"] == "" and one["p"] == "" and one["seeds"] == "1"
    assert real["flag"] == "" and float(real["ci_low"]) < float(real["diff"]) < float(real["ci_high"])
    assert real["p_holm"] == ""  # the only p-value: nothing to adjust
    md = (out / "report.md").read_text()
    table = {line.split(" | ")[0]: line for line in md.splitlines() if line.startswith("| arm ")}
    assert "+0.0000 (zero spread: no interval)" in table["| arm 1"]
    assert "+0.4900 (fewer than 2 seeds: no interval)" in table["| arm 2"]
    assert "arm 1: zero spread" in md and "arm 2: fewer than 2 seeds" in md  # and in the text
    assert md.count("- `") == 2  # the two failed runs, listed
    assert sum("no interval and no p-value" in w for w in report.warnings) == 2


def test_zero_spread_is_no_certainty():
    """A constant offset between the arms on every seed (the differences equal but for the last
    bits) and arms without spread give no interval and no p-value, paired or not."""
    base = {0: 4.1, 1: 4.3, 2: 4.7}
    d = difference({s: v + 0.1 for s, v in base.items()}, base)
    assert d.method == "paired" and d.flag == ZERO_SPREAD and d.low is None and d.p is None
    assert d.mean == pytest.approx(0.1)
    w = difference({5: 2.0, 6: 2.0}, {7: 1.0, 8: 1.0})
    assert w.method == "welch" and w.flag == ZERO_SPREAD and w.low is None and w.p is None
    assert difference({0: 2.0}, {0: 1.0, 1: 1.5}).flag == FEW_SEEDS
    assert estimate([0.3, 0.3, 0.3]).flag == ZERO_SPREAD and estimate([0.3]).flag == FEW_SEEDS


def test_the_one_sample_interval_against_scipy():
    stats = pytest.importorskip("scipy.stats", reason="SciPy is the reference for the interval")
    values = [0.21, 0.35, 0.28, 0.4]
    e = estimate(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=stats.tmean(values), scale=stats.sem(values))
    assert (e.mean, e.low, e.high) == pytest.approx((sum(values) / 4, low, high), rel=1e-6)


def test_the_learning_rate_sensitivity_of_each_arm(tmp_path):
    """Wortsman et al. 2023: per seed, the mean over the rates of min(L, L0) − L*, L0 = ln V (the
    runs do not record their initial loss); a diverged run counts as L0, a loss above L0 is capped."""
    from tests.compare.sweeps import VOCAB
    from zoo.compare.tune import compare_tuned

    l0 = math.log(VOCAB)
    losses = {
        "pre": {1e-3: [4.0, 4.1, 4.05], 3e-3: [3.5, 3.52, 3.55], 1e-2: [3.7, 3.6, 3.8]},
        "post": {1e-3: [4.5, 4.4, 4.6], 3e-3: [3.9, 4.0, 3.95], 1e-2: [None, 6.1, 5.0]},
    }
    runs = [
        ({"model.norm": norm, "optim.lr": lr, "seed": seed}, by_lr[lr][seed])
        for norm, by_lr in losses.items()
        for lr in RATES
        for seed in (0, 1, 2)
    ]
    sweep = write_sweep(tmp_path / "sweep", runs)
    out = tmp_path / "report"
    compare_tuned([sweep], out, key="optim.lr", plots=False)
    rows = _rows(out / "report.csv")
    for row, by_lr in zip(rows, losses.values()):
        per_seed = []
        for seed in (0, 1, 2):
            capped = [l0 if by_lr[lr][seed] is None else min(by_lr[lr][seed], l0) for lr in RATES]
            per_seed.append(sum(v - min(capped) for v in capped) / 3)
        expected = estimate(per_seed)
        assert float(row["sensitivity"]) == pytest.approx(sum(per_seed) / 3)
        assert (float(row["sensitivity_low"]), float(row["sensitivity_high"])) == pytest.approx(
            (expected.low, expected.high)
        )
        assert row["sensitivity_seeds"] == "3"
        held = {
            int(r["seed"]): float(r["sensitivity"])
            for r in _rows(out / "heldout.csv")
            if r["arm"] == row["arm"].split(" (")[0]
        }
        assert held == pytest.approx(dict(enumerate(per_seed)))
    assert float(rows[1]["sensitivity"]) > float(rows[0]["sensitivity"])  # post diverges: more sensitive
    md = (out / "report.md").read_text()
    assert "sensitivity to optim.lr [95% CI]" in md and "Wortsman et al. 2023" in md and "L0 = ln V" in md


def test_a_tuned_arm_identical_to_the_baseline_is_flagged_not_certain(tmp_path):
    """The μP study's case: an arm whose runs equal the baseline's on every seed."""
    from zoo.compare.tune import compare_tuned

    runs = [
        ({"model.norm": norm, "optim.lr": lr, "seed": seed}, 4.0 + abs(math.log10(lr / 3e-3)) + 0.01 * seed**2)
        for norm in ("pre", "rms")
        for lr in RATES
        for seed in (0, 1, 2)
    ]
    out = tmp_path / "report"
    report = compare_tuned([write_sweep(tmp_path / "sweep", runs)], out, key="optim.lr", plots=False)
    _, same = _rows(out / "report.csv")
    assert same["flag"] == ZERO_SPREAD and same["ci_low"] == "" and same["p"] == "" and float(same["diff"]) == 0.0
    md = (out / "report.md").read_text()
    assert "+0.0000 (zero spread: no interval)" in md and "arm 1: zero spread" in md
    assert any(n.startswith("arm 1: zero spread") for n in report.notes)


def test_a_multiplier_on_seeds_without_spread_has_no_interval_and_says_why():
    from zoo.compare.multipliers import fit_arms
    from zoo.compare.scaled_arms import ScaledArm, Size

    def arm(name: str, offset: float, spread: float) -> ScaledArm:
        sizes = []
        for i, c in enumerate((1e12, 4e12, 1.6e13)):
            finals = [3.0 * (c / 1e12) ** -0.1 + offset + spread * s for s in (0, 1, 2)]
            sizes.append(
                Size(
                    value=64 * 2**i,
                    runs=[],
                    compute=c,
                    mean=sum(finals) / 3,
                    std=0.0,
                    finals=finals,
                    by_seed=dict(enumerate(finals)),
                )
            )
        return ScaledArm(name=name, runs=[], sizes=sizes)

    base, flat, noisy = arm("arm 0", 0.0, 0.0), arm("arm 1", -0.05, 0.0), arm("arm 2", -0.05, 0.01)
    fit_arms([base, flat, noisy], base, irreducible=False, resamples=50)
    assert all(m.low is None and m.note == "zero spread over the seeds: no interval" for m in flat.multipliers)
    assert all(m.low is not None and m.low < m.value < m.high for m in noisy.multipliers)


def test_a_failed_runs_error_names_its_directory_by_its_place_not_the_machines_path(tmp_path, cli_here):
    """failed.json names the run's checkpoint by its absolute path; the report and runs.csv write
    the run's place in its sweep (`sweep/run`) instead, so no machine path is committed with them."""
    runs = [
        ({"model.norm": n, "seed": s}, None if (n, s) == ("post", 0) else 3.0 + 0.01 * s)
        for n in ("pre", "post")
        for s in (0, 1)
    ]
    sweep, out = write_sweep(tmp_path / "sweep", runs), tmp_path / "out"
    failed = next(p for p in sweep.iterdir() if (p / "failed.json").is_file())
    checkpoint = failed.resolve() / "checkpoints" / "last.ckpt"
    (failed / "failed.json").write_text(
        f'{{"status": "failed", "error": "not finite at step 9; the last good checkpoint is {checkpoint} (step 4)"}}'
    )
    assert cli_here("compare", str(sweep), f"out={out}").returncode == 0
    place = f"sweep/{failed.name}/checkpoints/last.ckpt"
    for name in ("report.md", "runs.csv"):
        written = (out / name).read_text()
        assert str(tmp_path) not in written and f"the last good checkpoint is {place} (step 4)" in written, name
