"""Training compute C counts the modules that run only in training (task.mtp_depth's): from the
summary's `train_flops_per_token`, or for a record written before zoo kept it, from the run's
config through the row's count (`zoo.config.schema.flops.mtp_flops`); runs.csv keeps the column
where any run has such modules, and a report rebuilt from it says what the first one said."""

from __future__ import annotations

import csv
import json

from tests.compare.sweeps import write_sweep
from zoo.compare.runs import BACKWARD_FACTOR
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.flops import mtp_flops

MODEL = {"model.n_layers": 2, "model.n_heads": 2, "model.vocab_size": 256, "data.seq_len": 32}
FLOPS, TOKENS = 5000, 20_000


def _mtp(width: int, depth: int) -> int:
    return mtp_flops(as_model_config({"d_model": width, "n_layers": 2, "n_heads": 2, "vocab_size": 256}), depth, 32)


def _sweep(tmp_path, depths=(0, 1)):
    runs = []
    for depth in depths:
        for width in (32, 64):
            for seed in (0, 1, 2):
                config = {**MODEL, "task.mtp_depth": depth, "model.d_model": width, "seed": seed}
                runs.append((config, 3.0 - width / 100 - 0.01 * depth + 0.004 * seed))
    return write_sweep(tmp_path / "sweep", runs, flops=FLOPS, tokens=TOKENS)


def test_an_older_record_counts_its_modules_from_its_config_and_the_table_keeps_them(tmp_path, cli_here):
    sweep, out = _sweep(tmp_path), tmp_path / "out"
    result = cli_here("compare", str(sweep), f"out={out}", "scale=model.d_model")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 12
    for row in rows:
        depth, width = int(row["task.mtp_depth"]), int(row["model.d_model"])
        train = FLOPS + (_mtp(width, 1) if depth else 0)
        assert float(row["flops_per_token"]) == FLOPS  # the model's, as it is evaluated and exported
        assert float(row["train_flops_per_token"]) == train
        assert float(row["compute"]) == BACKWARD_FACTOR * train * TOKENS
    assert _mtp(64, 1) > _mtp(32, 1) > 0
    assert "the modules that run only in training" in (out / "report.md").read_text()
    again = cli_here("compare", f"recompute={out}")
    assert again.returncode == 0 and "every value equals the report" in again.stdout, again.stdout[-3000:]


def test_the_recorded_figure_is_taken_before_the_config(tmp_path, cli_here):
    sweep, out = _sweep(tmp_path), tmp_path / "out"
    for job in sweep.iterdir():
        summary = json.loads((job / "summary.json").read_text())
        summary["train_flops_per_token"] = FLOPS + 7
        (job / "summary.json").write_text(json.dumps(summary))
    assert cli_here("compare", str(sweep), f"out={out}", "scale=model.d_model").returncode == 0
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert {float(r["compute"]) for r in rows} == {BACKWARD_FACTOR * (FLOPS + 7) * TOKENS}


def test_a_sweep_without_such_modules_has_no_column_and_no_words(tmp_path, cli_here):
    sweep, out = _sweep(tmp_path, depths=(0,)), tmp_path / "out"
    write_sweep(tmp_path / "other", [({**MODEL, "model.d_model": 64, "model.norm": "post", "seed": 0}, 2.0)])
    assert cli_here("compare", str(sweep), f"out={out}", "scale=model.d_model").returncode == 0
    with (out / "runs.csv").open() as handle:
        assert "train_flops_per_token" not in next(csv.reader(handle))
    assert "only in training" not in (out / "report.md").read_text()
