"""A tiny sweep through the real CLI, then `zoo-compare`: one row per arm, the difference to
the baseline with its interval, and a deliberately diverging arm reported as failed (the sweep
goes on past it)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli.compare", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_sweep_and_its_comparison(tmp_path):
    good, bad = tmp_path / "sweep", tmp_path / "diverging"
    swept = zoo_train("-m", *tiny_overrides(), "model.norm=pre,post", "seed=0,1", f"hydra.sweep.dir={good}")
    assert swept.returncode == 0, swept.stderr[-3000:]
    # lr 1e4 without clipping: the loss becomes non-finite within a few steps; both seeds run
    diverged = zoo_train(
        "-m", *tiny_overrides(), "optim.lr=1e4", "trainer.gradient_clip_val=null", "seed=0,1", f"hydra.sweep.dir={bad}"
    )
    assert diverged.returncode != 0
    assert all(json.loads((bad / job / "failed.json").read_text())["status"] == "failed" for job in ("0", "1"))

    out = tmp_path / "report"
    result = _compare(str(good), str(bad), f"out={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["arms"] == 3
    rows = list(csv.DictReader((out / "report.csv").open()))
    assert len(rows) == 3
    # only the settings that differ between arms are columns; the seed never is
    assert {"model.norm", "optim.lr", "trainer.gradient_clip_val"} <= set(rows[0]) and "seed" not in rows[0]
    baseline, post, failed = rows
    assert baseline["arm"].endswith("(baseline)") and baseline["model.norm"] == "pre" and baseline["diff"] == ""
    assert post["seeds"] == "2" and float(post["ci_low"]) <= float(post["diff"]) <= float(post["ci_high"])
    assert failed["status"] == "2 failed" and failed["val/loss mean"] == ""
    md = (out / "report.md").read_text()
    assert "Δ vs baseline [95% CI]" in md and "the training loss is nan" in md
    assert (
        len(re.findall(r"^\| arm \d", md, flags=re.M)) == 3
        and (out / "curves.png").stat().st_size > 0
        and (out / "final.png").is_file()
    )

    # another baseline, and perplexity at 1x and 4x the trained context (learned table: 64 = 2x)
    other = tmp_path / "other"
    chosen = _compare(str(good), f"out={other}", "baseline=model.norm=post", "lengths=1,4")
    assert chosen.returncode == 0, chosen.stderr[-3000:]
    assert list(csv.DictReader((other / "report.csv").open()))[1]["arm"].endswith("(baseline)")
    lengths = list(csv.DictReader((other / "lengths.csv").open()))
    assert [(r["model.norm"], r["eval_len"]) for r in lengths] == [
        ("pre", "32"),
        ("pre", "128"),
        ("post", "32"),
        ("post", "128"),
    ]
    at_1x = [r for r in lengths if r["multiple"] == "1"]
    assert all(r["runs"] == "2" and 1.0 < float(r["ppl_mean"]) < 300 for r in at_1x)  # byte vocabulary: 300
    for r in at_1x:  # the mean's 95% t interval on 1 degree of freedom: mean ± 12.706 · std / sqrt(2)
        half = 12.7062 * float(r["ppl_std"]) / 2**0.5
        assert float(r["ppl_low"]) == pytest.approx(float(r["ppl_mean"]) - half, rel=1e-4)
        assert float(r["ppl_high"]) == pytest.approx(float(r["ppl_mean"]) + half, rel=1e-4)
    assert all(r["note"] == "past the learned table" for r in lengths if r["multiple"] == "4")
    assert "## Length extrapolation" in (other / "report.md").read_text() and (other / "lengths.png").is_file()

    # each run's cache of those perplexities damaged (not JSON; a pipe; a negative figure): measured
    # again through the one reader, the same table (json.loads crashed, and a pipe hung the read)
    caches = sorted(good.glob("*/lengths.json"))
    assert len(caches) == 4
    caches[0].write_text("{not json")
    caches[1].unlink()
    os.mkfifo(caches[1])
    caches[2].write_text(json.dumps({"1": -5.0, "4": "past the learned table"}))
    again = _compare(str(good), f"out={tmp_path / 'again'}", "baseline=model.norm=post", "lengths=1,4")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "again" / "lengths.csv").read_text() == (other / "lengths.csv").read_text()


def test_bad_input_is_one_line(tmp_path):
    for args, words in [
        ((), "give one or more"),
        ((str(tmp_path / "nope"),), "not a directory"),
        ((str(tmp_path),), "no run directories"),
    ]:
        result = _compare(*args)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr


@pytest.mark.slow
def test_a_one_change_at_a_time_recipe_sweeps_its_arms(tmp_path):
    """recipes/ablate_norm.yaml: a baseline arm and one arm per change (recipes/arm/norm/*),
    each with its seeds, as a sweep without -m; the comparison shows exactly the changed keys."""
    sweep = tmp_path / "sweep"
    tiny = [o for o in tiny_overrides() if not o.startswith("trainer.max_steps")]
    result = zoo_train(
        "-cn",
        "ablate_norm",
        *tiny,
        "tokenizer.vocab_size=8192",
        "trainer.max_steps=3",
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = _compare(str(sweep), f"out={tmp_path / 'report'}")
    assert report.returncode == 0, report.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "report" / "report.csv").open()))
    settings = [(r["model.norm"], r["model.norm_type"]) for r in rows]
    assert settings == [("pre", "layernorm"), ("post", "layernorm"), ("pre", "rmsnorm")]
    assert all(r["status"] == "2 finished" for r in rows)


@pytest.mark.slow
def test_a_loss_per_token_is_not_compared_across_tokenizers(tmp_path):
    """Bytes against characters: val/loss is per token of each run's own tokenizer, so comparing
    it across them is refused on one line, naming val/bpb; val/bpb compares them, and for the
    byte tokenizer (every token one byte but the end of a document, which stands for no text and
    counts in neither sum) it is close to val/loss / ln 2."""
    import math

    sweep = tmp_path / "sweep"
    swept = zoo_train("-m", *tiny_overrides(), "tokenizer=byte,char", f"hydra.sweep.dir={sweep}")
    assert swept.returncode == 0, swept.stderr[-3000:]
    out = tmp_path / "report"
    refused = _compare(str(sweep), f"out={out}")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and "metric=val/loss is per token" in lines[0], refused.stderr
    assert "2 tokenizers" in lines[0] and "metric=val/bpb" in lines[0] and not out.exists()
    result = _compare(str(sweep), f"out={out}", "metric=val/bpb")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r["tokenizer.kind"]: r for r in csv.DictReader((out / "report.csv").open())}
    summary = json.loads((sweep / "0" / "summary.json").read_text())
    assert summary["tokenizer"]["kind"] == "byte"
    assert float(rows["byte"]["val/bpb mean"]) == pytest.approx(summary["metrics"]["val/loss"] / math.log(2), rel=2e-3)
    assert rows["char"]["val/bpb mean"] != ""
