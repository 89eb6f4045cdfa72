"""`zoo-compare SWEEP tune=optim.lr,optim.weight_decay`: each arm at its best combination of the
keys (`zoo.compare.joint`), on synthetic sweeps: the combination is chosen held out over seeds as
one key's value is, the report and heldout.csv name it, a best at a grid's edge along either key
is warned about, and recompute= rebuilds the report from runs.csv."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from tests.compare.sweeps import write_sweep

RATES, DECAYS = (1e-3, 2e-3, 4e-3), (0.0, 0.1, 0.3)


def _loss(optimizer: str, lr: float, wd: float, seed: int) -> float:
    """AdamW best at (2e-3, 0.1); Muon best at (4e-3, 0.1), and better there by 0.05; each
    seed adds its own offset."""
    best_lr = 2e-3 if optimizer == "adamw" else 4e-3
    floor = 3.0 if optimizer == "adamw" else 2.95
    return floor + 0.1 * abs(lr / best_lr - 1) + 0.2 * abs(wd - 0.1) + 0.003 * seed + 0.001 * (seed * seed % 2)


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli.compare", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def sweep(tmp_path):
    runs = [
        (
            {"optim.kind": kind, "optim.lr": lr, "optim.weight_decay": wd, "optim.betas": [0.9, 0.95], "seed": seed},
            _loss(kind, lr, wd, seed),
        )
        for kind in ("adamw", "muon")
        for lr in RATES
        for wd in DECAYS
        for seed in (0, 1, 2)
    ]
    return write_sweep(tmp_path / "sweep", runs)


def test_each_arm_is_taken_at_its_best_combination_and_the_report_rebuilds(sweep, tmp_path):
    out = tmp_path / "report"
    result = _compare(str(sweep), "tune=optim.lr,optim.weight_decay", f"out={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r["optim.kind"]: r for r in csv.DictReader((out / "report.csv").open())}
    assert rows["adamw"]["best optim.lr,optim.weight_decay"] == "0.002, 0.1"
    assert rows["muon"]["best optim.lr,optim.weight_decay"] == "0.004, 0.1"
    # held out over seeds: each seed measured at the combination the other two chose, the same here
    held = [r for r in csv.DictReader((out / "heldout.csv").open())]
    assert len(held) == 6 and {r["optim.lr,optim.weight_decay"] for r in held} == {"0.002, 0.1", "0.004, 0.1"}
    assert float(rows["muon"]["diff"]) == pytest.approx(-0.05, abs=1e-9)
    md = (out / "report.md").read_text()
    # Muon's best rate is the highest tried: the best may lie beyond the grid along optim.lr only
    assert "is at the edge of the grid in optim.lr=0.004 (highest)" in md and "optim.weight_decay=0.1 (" not in md
    assert json.loads((out / "comparison.json").read_text())["tune"] == "optim.lr,optim.weight_decay"
    rebuilt = _compare(f"recompute={out}")
    assert rebuilt.returncode == 0 and "DIFFERS" not in rebuilt.stdout, rebuilt.stdout[-3000:]
    # the joint key's parts are not "held fixed" in the rebuild either (runs.csv keeps them joined)
    from zoo.compare.recompute import rebuild

    rebuild(out, tmp_path / "again", plots=False)
    assert (tmp_path / "again" / "comparison.json").read_text() == (out / "comparison.json").read_text()


def test_tuning_the_rate_alone_keeps_the_decays_apart_as_arms(sweep, tmp_path):
    """Without the decay in tune=, each decay is an arm of its own: 2 optimizers x 3 decays."""
    out = tmp_path / "rate_only"
    result = _compare(str(sweep), "tune=optim.lr", f"out={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list(csv.DictReader((out / "report.csv").open()))) == 6


@pytest.mark.parametrize(
    ("tune", "words"),
    [
        ("optim.lr,optim.lr", "name each key once"),
        ("optim.lr,optim.betas_x", "has no config key optim.betas_x"),
        ("optim.lr,seed", "seed does not change what is learned"),
        ("optim.lr,optim.betas", "optim.betas holds a list"),
    ],
)
def test_a_joint_key_named_twice_or_missing_is_one_line(sweep, tune, words):
    result = _compare(str(sweep), f"tune={tune}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr


def test_a_scaled_report_tunes_the_combination_at_each_size_and_rebuilds(tmp_path):
    runs = [
        (
            {"optim.kind": kind, "model.d_model": d, "optim.lr": lr, "optim.weight_decay": wd, "seed": seed},
            _loss(kind, lr, wd, seed) - 0.1 * (d == 64),
        )
        for kind in ("adamw", "muon")
        for d in (32, 64)
        for lr in RATES
        for wd in DECAYS
        for seed in (0, 1, 2)
    ]
    sweep = write_sweep(
        tmp_path / "sweep",
        runs,
        flops=lambda c: 1000 * c["model.d_model"],
        params=lambda c: 10 * c["model.d_model"] ** 2,
    )
    out = tmp_path / "report"
    result = _compare(str(sweep), "scale=model.d_model", "tune=optim.lr,optim.weight_decay", f"out={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    kinds = {r["arm"].split(" (")[0]: r["optim.kind"] for r in csv.DictReader((out / "report.csv").open())}
    held = list(csv.DictReader((out / "heldout.csv").open()))
    chosen = {(kinds[r["arm"]], r["model.d_model"]): r["optim.lr,optim.weight_decay"] for r in held}
    assert len(held) == 12
    assert chosen == {
        (k, d): best for k, best in (("adamw", "0.002, 0.1"), ("muon", "0.004, 0.1")) for d in ("32", "64")
    }
    # Muon's best rate is the highest tried at each size: warned per size, along optim.lr only
    md = (out / "report.md").read_text()
    muon = next(a for a, k in kinds.items() if k == "muon")
    adamw = next(a for a, k in kinds.items() if k == "adamw")
    for d in (32, 64):
        assert (
            f"{muon} at model.d_model={d}: its best optim.lr,optim.weight_decay=(0.004, 0.1) is at the edge of "
            f"the grid in optim.lr=0.004 (highest); the best may lie beyond the grid"
        ) in md
        assert f"{adamw} at model.d_model={d}: its best" not in md
    rebuilt = _compare(f"recompute={out}")
    assert rebuilt.returncode == 0 and "DIFFERS" not in rebuilt.stdout, rebuilt.stdout[-3000:]
