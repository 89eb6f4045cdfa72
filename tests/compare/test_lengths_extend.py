"""`zoo-compare SWEEP lengths=... extend=RULE`: each arm that rotates with RoPE is evaluated again
with a context-extension rule stretching its trained context by each multiple (one more row per
rule, `ARM + RULE`), through the real CLI on a tiny sweep; the rebuilt report has the same rows."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli.compare", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_rope_arm_gets_a_row_per_rule_and_the_report_rebuilds(tmp_path):
    sweep, out = tmp_path / "sweep", tmp_path / "report"
    swept = zoo_train(
        "-m", *tiny_overrides(), "model/position=rope,alibi", "seed=0,1", "model.max_seq_len=128",
        f"hydra.sweep.dir={sweep}",
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr[-3000:]
    result = _compare(str(sweep), f"out={out}", "lengths=1,2", "extend=yarn,linear")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((out / "lengths.csv").open()))
    by = {(r["model.position.kind"], r["rope_scaling"], r["multiple"]): r for r in rows}
    assert sorted(by) == sorted(
        (kind, rule, m)
        for kind, rule in [("rope", ""), ("alibi", ""), ("rope", "yarn"), ("rope", "linear")]
        for m in ("1", "2")
    )  # ALiBi takes no RoPE rule: no row of its own
    ppl = {key: float(r["ppl_mean"]) for key, r in by.items()}
    # at 1x every rule is plain RoPE; at 2x each rule changes the frequencies, hence the perplexity
    assert ppl[("rope", "yarn", "1")] == ppl[("rope", "linear", "1")] == ppl[("rope", "", "1")]
    assert len({ppl[("rope", rule, "2")] for rule in ("", "yarn", "linear")}) == 3
    assert all(r["runs"] == "2" and r["eval_len"] == str(32 * int(r["multiple"])) for r in rows)
    md = (out / "report.md").read_text()
    assert "+ yarn |" in md and "+ linear |" in md and "model.position.scaling=RULE" in md
    # each run's cache holds the rules' perplexities beside the plain ones
    cache = json.loads(next(p for p in sorted(sweep.glob("*/lengths.json")) if "yarn:2" in p.read_text()).read_text())
    assert {"1", "2", "yarn:1", "yarn:2", "linear:1", "linear:2"} <= set(cache)
    rebuilt = _compare(f"recompute={out}")
    assert rebuilt.returncode == 0, rebuilt.stdout[-3000:] + rebuilt.stderr[-3000:]
    assert "DIFFERS" not in rebuilt.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["extend=yarn"], "extend=yarn stretches RoPE at evaluation lengths: give lengths=1,2,4 too"),
        (["lengths=1,2", "extend=yarns"], "extend"),
    ],
)
def test_a_rule_without_lengths_or_unknown_is_one_line(tmp_path, args, words):
    result = _compare(str(tmp_path), *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr
