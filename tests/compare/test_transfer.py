"""Decisions across sizes (`zoo.compare.transfer`, `zoo-compare SWEEP scale=KEY`): the bootstrap
decision accuracy on arms whose answer is known (a gap that holds at every size: near 1; an
ordering that flips at the largest size: near 0), the held-out-size prediction on losses drawn
from a power law (the truth inside its interval), decisions.csv and extrapolation.csv rebuilt
by `recompute=`, and the refusals on one line (one size, a scale key no run has, one seed with
agree=, agree= without scale=)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from tests.compare.sweeps import write_sweep
from zoo.compare.scaled_arms import ScaledArm, Size
from zoo.compare.stats import mean_std
from zoo.compare.transfer import decide

SIZES = (16, 32, 64, 128)


def _compute(width: int) -> float:
    return 6.0e6 * width**2


def _arm(name: str, losses: dict[int, list[float]]) -> ScaledArm:
    """An arm with, at each width, the given final losses (one per seed 0, 1, ...)."""
    sizes = []
    for width, finals in losses.items():
        mean, std = mean_std(finals)
        sizes.append(
            Size(
                value=width,
                runs=[],
                compute=_compute(width),
                mean=mean,
                std=std,
                finals=list(finals),
                by_seed=dict(enumerate(finals)),
            )
        )
    return ScaledArm(name=name, runs=[], sizes=sizes)


def _noisy(rng: np.random.Generator, center: float, sd: float, seeds: int = 3) -> list[float]:
    return [float(v) for v in center + sd * rng.standard_normal(seeds)]


def test_a_gap_that_holds_at_every_size_is_decided_alike_at_every_size():
    rng = np.random.default_rng(1)
    arms = [
        _arm(f"arm {i}", {w: _noisy(rng, 4.0 - 0.3 * math.log2(w) + 0.1 * i, 0.01) for w in SIZES}) for i in range(3)
    ]
    found = decide(arms, "model.d_model")
    assert found.largest == 128 and [s.size for s in found.sizes] == [16, 32, 64]
    for s in found.sizes:
        assert s.pairs == 3 and s.accuracy == 1.0 and s.mean > 0.99 and s.low == 1.0
        assert s.spearman == 1.0 and s.spearman_low == 1.0
    assert all(p.rate > 0.99 and p.observed == 1.0 and p.resolved for p in found.pairs) and len(found.pairs) == 9
    assert found.smallest == 16


def test_an_ordering_that_flips_at_the_largest_size_is_near_zero():
    rng = np.random.default_rng(2)
    first = {w: _noisy(rng, 3.0 - 0.2 * math.log2(w), 0.01) for w in SIZES}
    second = {w: _noisy(rng, 3.0 - 0.2 * math.log2(w) + (0.1 if w < 128 else -0.1), 0.01) for w in SIZES}
    found = decide([_arm("arm 0", first), _arm("arm 1", second)], "model.d_model")
    assert all(s.accuracy == 0.0 and s.mean < 0.01 and s.high == 0.0 for s in found.sizes)
    assert all(s.spearman is None for s in found.sizes)  # two arms: no rank correlation
    assert found.smallest is None


def test_a_pair_within_noise_at_the_largest_size_is_a_coin_flip_whatever_the_small_sizes_say():
    """The reference ordering has its own noise: arms equal at the largest size cannot be
    'predicted' by a small size, however clear the small size's ordering."""
    rng = np.random.default_rng(3)
    first = {w: _noisy(rng, 3.0, 0.05) for w in SIZES}
    second = {w: _noisy(rng, 3.0 + (0.5 if w < 128 else 0.0), 0.05, seeds=3) for w in SIZES}
    second[128] = [v - (np.mean(second[128]) - np.mean(first[128])) for v in second[128]]  # equal means there
    found = decide([_arm("arm 0", first), _arm("arm 1", second)], "model.d_model")
    assert all(0.3 < s.mean < 0.7 for s in found.sizes), [s.mean for s in found.sizes]
    assert all(p.resolved is False for p in found.pairs)  # the reference itself is unresolved


def test_the_smallest_agreeing_size_is_the_one_from_which_on_every_size_agrees():
    rng = np.random.default_rng(4)
    gap = {16: -0.2, 32: 0.2, 64: 0.2, 128: 0.2}  # wrong at the smallest size only
    arms = [_arm("arm 0", {w: _noisy(rng, 3.0, 0.01) for w in SIZES})]
    arms.append(_arm("arm 1", {w: _noisy(rng, 3.0 + gap[w], 0.01) for w in SIZES}))
    found = decide(arms, "model.d_model", rate=0.9)
    assert [round(s.mean) for s in found.sizes] == [0, 1, 1] and found.smallest == 32


def _power_law(width: int, a: float = 40.0, b: float = 0.12) -> float:
    return a * _compute(width) ** -b


@pytest.mark.parametrize("widths", [(16, 32, 64, 128, 256), (16, 32, 64)], ids=["4 fitted", "2 fitted"])
def test_the_held_out_size_is_predicted_by_the_others_within_its_interval(widths):
    """Losses drawn around a power law: the fit on all sizes but the largest predicts the largest
    within its seed-bootstrap interval, and the truth lies inside it; without noise the
    prediction is the truth."""
    rng = np.random.default_rng(5)
    noisy = _arm("arm 0", {w: _noisy(rng, _power_law(w), 0.004, seeds=4) for w in widths})
    exact = _arm("arm 1", {w: [_power_law(w)] * 3 for w in widths})
    found = decide([noisy, exact], "model.d_model")
    truth = _power_law(widths[-1])
    p, q = found.predictions
    assert p.size == widths[-1] and p.fitted == len(widths) - 1
    assert p.form == ("a·C^-b on 4 sizes" if len(widths) == 5 else "a·C^-b through 2 sizes")
    assert p.low < truth < p.high and p.low <= p.predicted <= p.high
    assert p.observed == pytest.approx(np.mean(noisy.sizes[-1].finals))
    assert q.predicted == pytest.approx(truth, rel=1e-9) and q.low == pytest.approx(truth, rel=1e-9)
    assert q.inside is True and q.error == pytest.approx(0.0, abs=1e-9)


def test_a_curve_that_bends_at_the_largest_size_is_outside_its_interval():
    rng = np.random.default_rng(6)
    widths = (16, 32, 64, 128, 256)
    losses = {w: _noisy(rng, _power_law(w) * (0.9 if w == 256 else 1.0), 0.004, seeds=4) for w in widths}
    other = _arm("arm 1", {w: _noisy(rng, _power_law(w), 0.004, seeds=4) for w in widths})
    (p, _) = decide([_arm("arm 0", losses), other], "model.d_model").predictions
    assert p.inside is False and p.error == pytest.approx(-0.1, abs=0.02)


def test_an_arm_with_two_sizes_has_no_held_out_prediction_and_says_why():
    found = decide([_arm("arm 0", {16: [3.0, 3.1], 32: [2.8, 2.9]})], "model.d_model")
    assert found.predictions[0].predicted is None and "holding one out needs 3 or more" in found.predictions[0].note
    assert found.note == "one arm: there is no decision to compare"


def _sweep(tmp_path: Path, widths=SIZES, seeds=(0, 1, 2), name: str = "sweep") -> Path:
    runs = []
    for norm, shift in (("pre", 0.0), ("post", 0.05), ("sandwich", 0.1)):
        for width in widths:
            for seed in seeds:
                loss = _power_law(width) + shift + 0.01 * ((seed * 5 + width) % 3)
                runs.append(({"model.norm": norm, "model.d_model": width, "seed": seed}, loss))
    return write_sweep(tmp_path / name, runs, flops=lambda c: 2 * c["model.d_model"] ** 2)


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_scaled_report_writes_its_decisions_and_recompute_checks_them(tmp_path, cli_here):
    sweep, out = _sweep(tmp_path), tmp_path / "report"
    result = cli_here("compare", str(sweep), f"out={out}", "scale=model.d_model", "agree=0.75")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(out / "decisions.csv")
    assert [r["pair"] for r in rows[:3]] == ["all 3 pairs"] * 3 and len(rows) == 3 + 3 * 3
    assert {r["agree"] for r in rows} == {"0.75"} and all(r["accuracy"] == "1.0" for r in rows)
    held = _rows(out / "extrapolation.csv")
    assert [r["arm"] for r in held] == ["arm 0", "arm 1", "arm 2"] and all(r["model.d_model"] == "128" for r in held)
    md = (out / "report.md").read_text()
    assert "## Decisions across sizes" in md and "## Held-out size" in md and "## Power" in md
    assert "| `16` | 3 | 100% | 100% [100%, 100%] | +1.00 [+1.00, +1.00] | yes |" in md
    assert (out / "decisions.png").is_file()
    again = cli_here("compare", f"recompute={out}")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "every value equals the report" in again.stdout
    with (out / "extrapolation.csv").open() as handle:
        text = handle.read()
    first = held[0]["predicted"]
    (out / "extrapolation.csv").write_text(text.replace(first, str(float(first) + 0.01), 1))
    changed = cli_here("compare", f"recompute={out}")
    assert changed.returncode == 1 and "extrapolation.csv arm 0 predicted" in changed.stdout
    assert "DIFFERS" in changed.stdout


def _one_line(result, *fragments: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert all(f in lines[0] for f in fragments), lines[0]
    return lines[0]


def test_refusals_are_one_line(tmp_path, cli_here):
    one_size = _sweep(tmp_path, widths=(32,), name="one_size")
    _one_line(
        cli_here("compare", str(one_size), "scale=model.d_model"),
        "scale=model.d_model: every run has model.d_model=32, one size",
    )
    many = _sweep(tmp_path, name="many")
    _one_line(cli_here("compare", str(many), "scale=data.width"), "scale=data.width: no run has this config key")
    one_seed = _sweep(tmp_path, seeds=(0,), name="one_seed")
    _one_line(
        cli_here("compare", str(one_seed), "scale=model.d_model", "agree=0.8"),
        "has 1 seed with a result: a bootstrap over seeds needs 2 or more",
    )
    _one_line(cli_here("compare", str(many), "agree=0.8"), "agree=0.8", "give scale=KEY too")
    _one_line(cli_here("compare", str(many), "scale=model.d_model", "agree=1.5"), "agree=1.5: give the rate")
    said = cli_here("compare", str(one_seed), "scale=model.d_model", f"out={tmp_path / 'quiet'}")
    assert said.returncode == 0, said.stderr[-3000:]  # without agree=: the report says it
    md = (tmp_path / "quiet" / "report.md").read_text()
    assert "Every arm has one seed with a result at every size: each draw is the means themselves" in md
