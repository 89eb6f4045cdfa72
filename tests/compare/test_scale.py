"""`zoo-compare SWEEP scale=model.d_model` on a real sweep through `zoo-train -m` (2 activation
arms x 3 widths x 2 seeds, tiny): the fit and the multipliers checked against the runs' own
summary files, scaling.png, and the too-few-sizes case on a sweep of two of its widths; the
grouping of a size that sets several keys at once; bad scale= input on one line."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from zoo.compare.runs import BACKWARD_FACTOR, Run, RunStatus
from zoo.compare.scaled_arms import scale_arms

WIDTHS = (16, 32, 64)


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli.compare", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scale") / "sweep"
    overrides = [
        o
        for o in tiny_overrides()
        if not o.startswith(("model.d_model=", "trainer.max_steps=", "trainer.val_check_interval="))
    ]
    result = zoo_train(
        "-m",
        *overrides,
        "trainer.max_steps=12",
        "trainer.val_check_interval=12",
        "optim.lr=3e-3",
        "model.activation=gelu,swiglu",
        f"model.d_model={','.join(map(str, WIDTHS))}",
        "seed=0,1",
        f"hydra.sweep.dir={root}",
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return root


def _points(sweep: Path) -> dict:
    """(activation, width) -> [(training compute, final val/loss)] from each run's own files."""
    out: dict = {}
    for job in sweep.iterdir():
        if not (job / "summary.json").is_file():
            continue
        overrides = (job / ".hydra" / "overrides.yaml").read_text()
        activation = "swiglu" if "model.activation=swiglu" in overrides else "gelu"
        width = next(int(w) for w in WIDTHS if f"model.d_model={w}\n" in overrides + "\n")
        summary = json.loads((job / "summary.json").read_text())
        compute = BACKWARD_FACTOR * summary["model"]["flops_per_token"] * summary["tokens_seen"]
        out.setdefault((activation, width), []).append((compute, summary["metrics"]["val/loss"]))
    return out


@pytest.mark.slow
def test_each_arm_is_fitted_across_its_sizes_with_multipliers(sweep, tmp_path):
    out = tmp_path / "report"
    result = _compare(str(sweep), f"out={out}", "scale=model.d_model")
    assert result.returncode == 0, result.stderr[-3000:]
    points = _points(sweep)
    assert len(points) == 6 and all(len(v) == 2 for v in points.values())
    rows = list(csv.DictReader((out / "report.csv").open()))
    assert [(r["model.activation"], int(r["model.d_model"])) for r in rows] == [
        (a, w) for a in ("gelu", "swiglu") for w in WIDTHS
    ]
    fits = {}
    for activation in ("gelu", "swiglu"):
        mine = [r for r in rows if r["model.activation"] == activation]
        computes = [np.mean([c for c, _ in points[(activation, w)]]) for w in WIDTHS]
        losses = [np.mean([v for _, v in points[(activation, w)]]) for w in WIDTHS]
        for row, c, v in zip(mine, computes, losses):
            assert float(row["compute"]) == pytest.approx(c) and float(row["val/loss mean"]) == pytest.approx(v)
            assert row["seeds"] == "2"
        slope, intercept = np.polyfit(np.log(computes), np.log(losses), 1)  # numpy's own fit
        exponent = float(mine[0]["exponent"])
        assert exponent == pytest.approx(-slope, rel=1e-6)
        low, high = float(mine[0]["exponent_low"]), float(mine[0]["exponent_high"])
        assert low < exponent < high
        fits[activation] = (slope, intercept, computes, losses)
    # the multiplier of swiglu at each of its sizes: the compute gelu's curve, moved through gelu's
    # measured loss at that size, needs to reach swiglu's measured loss, over swiglu's compute
    gelu_slope, _, base_computes, base_losses = fits["gelu"]
    _, _, computes, losses = fits["swiglu"]
    assert gelu_slope < 0  # wider models reach a lower loss in this sweep: the curve falls
    for row, cb, lb, ca, la in zip(
        [r for r in rows if r["model.activation"] == "swiglu"], base_computes, base_losses, computes, losses
    ):
        expected = cb / ca * (lb / la) ** (1 / -gelu_slope)
        assert float(row["multiplier"]) == pytest.approx(expected, rel=1e-6)
        # its side of 1 is the measured one where the compute does not say otherwise: an arm
        # measured worse at no less compute is never a gain, one measured better at no more
        # compute never a loss (an arm better by less than its extra compute is worth is below 1)
        if la > lb and ca >= cb:
            assert float(row["multiplier"]) < 1
        if la < lb and ca <= cb:
            assert float(row["multiplier"]) > 1
        assert float(row["multiplier_low"]) <= float(row["multiplier"]) <= float(row["multiplier_high"])
    for row in rows:  # the fit's quality: residuals, error, and an exponent interval that holds the misfit
        slope, intercept, _, _ = fits[row["model.activation"]]
        fitted = math.exp(intercept + slope * math.log(float(row["compute"])))
        assert float(row["residual"]) == pytest.approx(math.log(float(row["val/loss mean"]) / fitted), abs=1e-9)
        assert row["fit_df"] == "1" and float(row["exponent_low"]) <= float(row["exponent_fit_low"])
        assert float(row["exponent_high"]) >= float(row["exponent_fit_high"])
        assert float(row["D/N"]) == pytest.approx(float(row["D"]) / float(row["N"]))
    assert "the fits go through 3 sizes (1 residual degree of freedom): they are descriptive" in result.stderr
    assert all(r["multiplier"] == "" for r in rows if r["model.activation"] == "gelu")  # the baseline
    md = (out / "report.md").read_text()
    assert "## Fits" in md and "## Compute multiplier against the baseline (arm 0)" in md
    assert "At the largest size (model.d_model=64)" in md and "![" in md
    assert (out / "scaling.png").stat().st_size > 10_000
    assert json.loads(result.stdout)["files"]["scaling"] == str(out / "scaling.png")


@pytest.mark.slow
def test_too_few_sizes_are_said_not_fitted(sweep, tmp_path):
    two = tmp_path / "two-widths"
    two.mkdir()
    for job in sweep.iterdir():  # the same real runs, without the widest size
        if job.is_dir() and "model.d_model=64" not in (job / ".hydra" / "overrides.yaml").read_text():
            shutil.copytree(job, two / job.name)
    out = tmp_path / "report"
    result = _compare(str(two), f"out={out}", "scale=model.d_model")
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "no power law" in line]
    assert len(warnings) == 2 and all("2 compute values; fitting a·C^-b needs at least 3" in w for w in warnings)
    rows = list(csv.DictReader((out / "report.csv").open()))
    assert len(rows) == 4 and all(r["exponent"] == "" and r["multiplier"] == "" for r in rows)
    md = (out / "report.md").read_text()
    assert "none: 2 compute values" in md and "– (the baseline has no fit)" in md


def _run(activation: str, width: int, layers: int, seed: int, loss: float) -> Run:
    config = {
        "model.activation": activation,
        "model.d_model": width,
        "model.n_layers": layers,
        "trainer.max_steps": 10 * width,
        "seed": seed,
        "optim.lr": 1e-3,
    }
    summary = {
        "metrics": {"val/loss": loss},
        "model": {"flops_per_token": 100 * width * layers},
        "tokens_seen": 1000 * width,
    }
    return Run(
        path=Path(f"/r/{activation}{width}{seed}"),
        overrides=[],
        config=config,
        status=RunStatus.finished,
        summary=summary,
    )


def test_keys_that_change_with_the_size_are_part_of_it():
    runs = [
        _run(a, w, layers, s, 3.0 - w / 100)
        for a in ("gelu", "swiglu")
        for w, layers in ((16, 1), (32, 2), (64, 4))
        for s in (0, 1)
    ]
    arms, keys, linked = scale_arms(runs, "model.d_model", "val/loss")
    assert linked == ["model.n_layers", "trainer.max_steps"] and keys == ["model.activation"]
    assert [[s.value for s in arm.sizes] for arm in arms] == [[16, 32, 64], [16, 32, 64]]
    assert arms[0].sizes[1].compute == BACKWARD_FACTOR * 100 * 32 * 2 * 1000 * 32
    # a key that differs within one size is an arm's setting, not a part of the size
    runs.append(_run("gelu", 16, 2, 0, 2.9))
    arms, keys, linked = scale_arms(runs, "model.d_model", "val/loss")
    assert "model.n_layers" in keys and linked == ["trainer.max_steps"]
    assert len(arms) == 6  # each activation x depth is an arm of its own now


@pytest.mark.slow
def test_bad_scale_input_is_one_line(sweep, tmp_path):
    cases = [
        ("scale=model.nope", "no run has this config key"),
        ("scale=seed", "does not change what is learned"),
        ("scale=model.d_model metric=val/accuracy", "scale= fits a loss falling with compute"),
        ("scale=model.d_model tune=model.d_model", "name the same key"),
        ("scale=model.d_model tune=optim.nope", "tune=optim.nope: no run has this config key"),
        ("scale=model.d_model lengths=1,2", "cannot be combined"),
    ]
    for args, message in cases:
        out = tmp_path / "out"
        result = _compare(str(sweep), f"out={out}", *args.split())
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and message in lines[0], (args, result.stderr[-1500:])
        assert not out.exists()


@pytest.mark.slow
def test_a_size_without_results_is_said_and_every_arms_sizes_are_shown(sweep, tmp_path):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    for job in copy.iterdir():
        if not job.is_dir():
            continue
        overrides = (job / ".hydra" / "overrides.yaml").read_text()
        if "model.activation=gelu" in overrides and "model.d_model=64\n" in overrides + "\n":
            shutil.rmtree(job)  # the baseline never ran its widest size
        elif "model.activation=swiglu" in overrides and "model.d_model=32\n" in overrides + "\n":
            (job / "summary.json").unlink()  # this size of the other arm failed
            (job / "failed.json").write_text(json.dumps({"status": "failed", "error": "diverged"}))
    out = tmp_path / "report"
    result = _compare(str(copy), f"out={out}", "scale=model.d_model")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "arm 1 at model.d_model=32: no finished run with a finite metric and compute (2 failed)" in result.stderr
    assert "arm 0: no power law: 2 compute values" in result.stderr  # the baseline has two sizes left
    assert "arm 1: no power law: 2 compute values" in result.stderr  # and so has the other arm
    md = (out / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| arm | model.activation | fit"))
    assert "model.d_model=16" in header and "model.d_model=32" in header and "model.d_model=64" in header
    arm1 = next(line for line in md.splitlines() if line.startswith("| arm 1 | `swiglu` | none: "))
    assert arm1.count(" ± ") == 2  # its two finished sizes, 16 and 64, shown; 32 has none


def _tuned_run(width: int, lr: float, seed: int, loss: float) -> Run:
    config = {"model.activation": "gelu", "model.d_model": width, "optim.lr": lr, "seed": seed}
    summary = {
        "metrics": {"val/loss": loss},
        "model": {"flops_per_token": 100 * width, "non_embedding_params": 12 * width},
        "tokens_seen": 1000 * width,
        "data": {"train_tokens": 500 * width},
    }
    return Run(
        path=Path(f"/r/{width}-{lr}-{seed}"), overrides=[], config=config, status=RunStatus.finished, summary=summary
    )


def test_scale_with_tune_takes_each_size_at_its_own_rate_held_out():
    """Wider models prefer a lower rate here (best 1e-2 at width 16, 1e-3 at 64): each size is
    measured at its own best rate, each seed at the rate chosen on the other seeds; the
    accounting says the sizes read their training split twice."""
    best = {16: 1e-2, 32: 3e-3, 64: 1e-3}
    runs = [
        _tuned_run(w, lr, s, 3.0 - w / 100 + (0.0 if lr == best[w] else 0.2) + 0.01 * s)
        for w in best
        for lr in (1e-3, 3e-3, 1e-2)
        for s in (0, 1, 2)
    ]
    runs.append(_tuned_run(64, 1e-2, 3, 2.0))  # one lucky seed at a bad rate: it cannot choose for itself
    arms, keys, linked = scale_arms(runs, "model.d_model", "val/loss", tune="optim.lr")
    (arm,) = arms
    assert "optim.lr" not in linked and [s.tuned for s in arm.sizes] == [1e-2, 3e-3, 1e-3]
    widest = arm.sizes[-1]
    # seed 3 ran only at 1e-2: left out, the other seeds pick 1e-3, where seed 3 has no run
    assert sorted(widest.finals) == pytest.approx([2.36, 2.37, 2.38]) and widest.held_out
    assert all(s.epochs == pytest.approx(2.0) for s in arm.sizes)
    from zoo.compare.scale import _design_warnings

    warnings = _design_warnings(arms, "model.d_model", "optim.lr")
    assert sum("reads its training split 2.00 times" in w for w in warnings) == 3
