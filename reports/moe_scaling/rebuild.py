"""The reports of this study made again by zoo-compare from their committed tables (runs.csv,
comparison.json), since the run directories are not committed: the scaled report in this
directory and the per-size ones in at_48/, at_72/, at_96/, long_48/ and long_96/.

The first tables lack two things a report says, which the report.md of each said and this file
restores: the settings every run held fixed (its "Held fixed" line: `HELD`, the size of a
per-size report, and the steps), and, in the per-size tables, the sweep each run came from (they
named a run directory given alone by its job number, `0`, which moe_a and moe_b both hold). A run
of at_D is found in this directory's runs.csv (the same settings, size, seed, rate and final
val/loss); a run of long_D by its arm (dense ran in the sweep moe_long_dense, switch in
moe_long_switch). Both are checked against the "Runs from" line each report.md gave, and every
"Held fixed" line against the one before. The tables written now hold both, so
`zoo-compare recompute=DIR` rebuilds each report whole.

    python reports/moe_scaling/rebuild.py      # -> every report of this study, in place"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from zoo.compare.scale import compare_scaled
from zoo.compare.table import SPEC, read_runs
from zoo.compare.tune import compare_tuned

HERE = Path(__file__).resolve().parent
HELD = {
    "data.source": "kjv",
    "tokenizer.kind": "byte",
    "data.seq_len": 64,
    "data.global_batch_size": 16,
    "optim.kind": "adamw",
    "optim.weight_decay": 0.0,
    "scheduler.kind": "cosine",
    "scheduler.warmup_steps": 15,
    "model.parametrization": "standard",
    "model.n_layers": 2,
    "model.n_heads": 4,
    "model.n_kv_heads": None,  # at its default: as many as the heads
    "model.d_ff": None,  # sized by model.ff_mult (4 unless set)
}
# report directory -> (steps, d_model held fixed or None where it is the scale)
REPORTS = {
    ".": (300, None),
    "at_48": (300, 48),
    "at_72": (300, 72),
    "at_96": (300, 96),
    "long_48": (1200, 48),
    "long_96": (1200, 96),
}
SAME_RUN = ("model.ffn", "model.ff_mult", "model.moe_top_k", "model.moe_renorm", "task.moe_balance", "seed", "optim.lr")


def _line(md: str, start: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(start))


def _sweeps(name: str, d_model: int, rows: list[dict]) -> list[tuple[str, str]]:
    """(sweep, job) of each row of a per-size table, in its order."""
    if name.startswith("long_"):
        return [(f"moe_long_{'switch' if r['model.ffn'] == 'moe' else 'dense'}", r["sweep"]) for r in rows]
    with (HERE / "runs.csv").open(newline="") as handle:
        scaled = [r for r in csv.DictReader(handle) if r["model.d_model"] == str(d_model)]
    where = {_same_run(r): (r["sweep"], r["run"]) for r in scaled}
    return [where[_same_run(r)] for r in rows]


def _same_run(row: dict) -> tuple:
    return tuple(row.get(k) for k in (*SAME_RUN, "val/loss"))


def rebuild(name: str, steps: int, d_model: int | None) -> None:
    out = HERE / name
    md = (out / "report.md").read_text(encoding="utf-8")
    held_before, runs_before = _line(md, "Held fixed:"), _line(md, "Runs from")
    spec, runs, left_out = read_runs(out)
    assert not left_out
    held = {**HELD, "trainer.max_steps": steps, **({"model.d_model": d_model} if d_model else {})}
    with (out / "runs.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if d_model is not None and all(r["run"] == "." for r in rows):  # a first-version table
        places = _sweeps(name, d_model, rows)
        named = set(re.findall(r"`([^`]+)`", runs_before.split(".", 1)[0]))
        assert named == {f"{s}/{j}" for s, j in places}, name
        for run, (sweep, job) in zip(runs, places):
            run.root, run.path = Path(sweep), Path(sweep) / job
    for run in runs:
        run.config = {**held, **run.config}
    common = dict(metric=spec["metric"], baseline=spec["baseline"], found=(runs, left_out))
    if spec["kind"] == "scaled":
        compare_scaled([], out, key=spec["scale"], tune=spec["tune"], irreducible=spec.get("irreducible"), **common)
    else:
        compare_tuned([], out, key=spec["tune"], pairs=bool(spec.get("pairs")), **common)
    assert _line((out / "report.md").read_text(encoding="utf-8"), "Held fixed:") == held_before, name
    assert (out / SPEC).is_file()


if __name__ == "__main__":
    for name, (steps, d_model) in REPORTS.items():
        rebuild(name, steps, d_model)
        print(f"rebuilt {name}")
