"""`zoo-compare SWEEP tune=optim.lr`: each arm (config minus seed and learning rate) at its own
best rate, on a real sweep of 2 arms x 3 rates through `zoo-train -m`; the warning when an arm's
best rate is at the edge of the grid; bad tune= input on one line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from zoo.compare.verdict import lower_is_better


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli.compare", *args], capture_output=True, text=True, timeout=300)


def _final_losses(sweep) -> dict:
    """(norm, lr) -> final val/loss of each finished run, read from its own files."""
    out = {}
    for job in sweep.iterdir():
        summary = job / "summary.json"
        if summary.is_file():
            overrides = (job / ".hydra" / "overrides.yaml").read_text()
            norm = "pre" if "model.norm=pre" in overrides else "post"
            lr = next(line.split("=")[1] for line in overrides.splitlines() if "optim.lr=" in line)
            out[(norm, float(lr))] = json.loads(summary.read_text())["metrics"]["val/loss"]
    return out


@pytest.mark.slow
def test_each_arm_is_reported_at_its_own_best_rate(tmp_path):
    sweep = tmp_path / "sweep"
    # 1e-6 learns nothing in 6 steps, 3e-3 learns, 1e4 without clipping diverges (a failed run)
    swept = zoo_train(
        "-m",
        *tiny_overrides(),
        "model.norm=pre,post",
        "optim.lr=1e-6,3e-3,1e4",
        "trainer.gradient_clip_val=null",
        f"hydra.sweep.dir={sweep}",
        timeout=600,
    )
    assert swept.returncode != 0  # the diverging jobs fail; the sweep goes on past them
    finals = _final_losses(sweep)
    assert len(finals) == 4  # 2 arms x 2 rates finished

    out = tmp_path / "report"
    result = _compare(str(sweep), f"out={out}", "tune=optim.lr")
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    # 3e-3 is inside the grid tried: no edge warning; one seed: the choice is measured on it, said
    assert len(warnings) == 1 and "winner's curse" in warnings[0] and "beyond the grid" not in result.stderr
    rows = list(csv.DictReader((out / "report.csv").open()))
    assert len(rows) == 2 and [r["model.norm"] for r in rows] == ["pre", "post"]
    assert "optim.lr" not in rows[0] and "seed" not in rows[0]
    for row in rows:
        norm = row["model.norm"]
        expected = min((lr for n, lr in finals if n == norm), key=lambda lr: finals[(norm, lr)])
        assert float(row["best optim.lr"]) == expected == 3e-3
        assert float(row["val/loss mean"]) == pytest.approx(finals[(norm, expected)])
        assert row["curve"].count(":") == 3  # every rate tried, the failed one without a value
    base, post = rows
    assert base["arm"].endswith("(baseline)") and base["diff"] == ""
    assert float(post["diff"]) == pytest.approx(finals[("post", 3e-3)] - finals[("pre", 3e-3)])
    assert post["ci_low"] == ""  # one seed per arm: no interval, said so in the report
    md = (out / "report.md").read_text()
    assert "each arm is shown at the optim.lr with the lowest mean final val/loss" in md
    assert "0.003: " in md and "*" in md and (out / "tuning.png").stat().st_size > 0

    # an arm whose best rate is the highest one tried is warned about (the grid may be too narrow);
    # with 2 seeds each seed is measured at the rate the other seed chose (here both choose 3e-3)
    narrow = tmp_path / "narrow"
    swept = zoo_train(
        "-m", *tiny_overrides(), "optim.lr=1e-6,3e-3", "seed=0,1", f"hydra.sweep.dir={narrow}", timeout=600
    )
    assert swept.returncode == 0, swept.stderr[-3000:]
    result = _compare(str(narrow), f"out={tmp_path / 'narrow-report'}", "tune=optim.lr")
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [line for line in result.stderr.splitlines() if "warning" in line]
    assert line == (
        "zoo-compare: warning: arm 0: its best optim.lr=0.003 is the highest value tried; "
        "the best may lie beyond the grid"
    )
    assert "## Warnings" in (tmp_path / "narrow-report" / "report.md").read_text()
    (row,) = list(csv.DictReader((tmp_path / "narrow-report" / "report.csv").open()))
    assert row["seeds"] == "2" and float(row["held_out mean"]) == pytest.approx(float(row["val/loss mean"]))

    # bad input: one line each, nothing written
    for args, words in [
        (("tune=optim.nope",), "tune=optim.nope: no run has this config key"),
        (("tune=seed",), "tune=seed: this key does not change what is learned"),
        (("tune=optim.lr", "metric=tokens_seen"), "which way is better is known for"),
        (("tune=optim.lr", "lengths=1,2"), "cannot be combined"),
    ]:
        bad = _compare(str(narrow), f"out={tmp_path / 'bad'}", *args)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and words in lines[0], bad.stderr
        assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "metric, lower",
    [("val/loss", True), ("val/ppl", True), ("val/accuracy", False), ("val/bleu", False), ("val/exact_match", False)],
)
def test_which_way_is_better(metric, lower):
    assert lower_is_better(metric) is lower


def test_a_best_word_at_an_end_of_the_list_is_not_called_the_edge_of_a_grid():
    """tune=model.norm ordered pre, post as if they were numbers and warned that the best 'may lie
    beyond the grid'; a numeric key at its edge still is warned about."""
    from pathlib import Path

    from zoo.compare.runs import Run, RunStatus
    from zoo.compare.tune import tune_arms

    def runs(key, losses):
        return [
            Run(
                path=Path(f"{value}-{seed}"),
                overrides=[],
                config={key: value, "seed": seed},
                status=RunStatus.finished,
                summary={"metrics": {"val/loss": loss + 0.01 * seed}},
            )
            for value, loss in losses.items()
            for seed in (0, 1)
        ]

    (arm,), _ = tune_arms(runs("model.norm", {"pre": 1.0, "post": 2.0}), "model.norm", "val/loss")
    assert arm.best.value == "pre" and not arm.warning
    (arm,), _ = tune_arms(runs("optim.lr", {1e-3: 1.0, 1e-2: 2.0}), "optim.lr", "val/loss")
    assert arm.best.value == 1e-3 and "is the lowest value tried" in arm.warning
    # a lowest value of 0 among values none negative is a bound (no weight decay), not an edge
    (arm,), _ = tune_arms(runs("optim.weight_decay", {0.0: 1.0, 0.1: 2.0}), "optim.weight_decay", "val/loss")
    assert arm.best.value == 0.0 and not arm.warning
    (arm,), _ = tune_arms(runs("optim.weight_decay", {0.0: 2.0, 0.1: 1.0}), "optim.weight_decay", "val/loss")
    assert arm.best.value == 0.1 and "is the highest value tried" in arm.warning


def test_a_joint_best_at_zero_weight_decay_is_no_edge_along_it():
    from zoo.compare.joint import edges

    tried = [f"{lr}, {wd}" for lr in (0.001, 0.002, 0.004) for wd in (0.0, 0.1)]
    assert edges("optim.lr,optim.weight_decay", tried, "0.002, 0.0") == []
    assert edges("optim.lr,optim.weight_decay", tried, "0.001, 0.1") == [
        "optim.lr=0.001 (lowest)",
        "optim.weight_decay=0.1 (highest)",
    ]
