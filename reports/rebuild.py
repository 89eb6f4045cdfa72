"""A committed report made again by zoo-compare from its own tables (runs.csv, comparison.json),
since the run directories are not committed, and written in place of the one it was.

The first tables lacked what their report.md says and a rebuild could not, which this restores
from the report.md and checks against it:

- the settings every run held fixed (comparison.json's `fixed`), read from the "Held fixed"
  line (`zoo.compare.design.held_from_line`): the rebuilt line must equal it;
- in a scaled report, the keys that change with the size (comparison.json's `linked`: depth,
  heads, steps), read from the "(with ..., which change with it)" of its "Runs from" line;
- in a table of run directories compared one by one (a study's per-size reports), the sweep
  each run came from: the first tables named such a run by its job number alone (`0`, run
  `.`), which every sweep of a study holds. The run is found in the study's table one folder up
  (the same job number and the same settings, seed, rate, final metrics and accounting, in one
  sweep only), and the runs so placed must be those the report's "Runs from" line named.

A table that already holds them is rebuilt as it is. Every number comes from the same per-run
values, so none changes; the wording does where zoo-compare's changed since ("Runs from" names
the sweeps, a run is `glu_dn10_a/0`). curves.png is kept: runs.csv holds each run's final
values, not its validation curve.

    python reports/rebuild.py reports/glu_scaling/at_24 ...   # -> those reports, in place
    python reports/rebuild.py                                 # -> every report with a runs.csv"""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from zoo.compare.design import held_from_line
from zoo.compare.recompute import rebuild
from zoo.compare.runs import Run
from zoo.compare.table import RUNS, SPEC, read_runs
from zoo.config.records.atomic import write_text

HERE = Path(__file__).resolve().parent
KEPT = ("curves.png",)  # drawn from the run directories only
FIRST_RUN = "."  # how a first table named a run directory given alone


def line(md: str, start: str) -> str:
    """The report's line that begins with `start`."""
    return next(text for text in md.splitlines() if text.startswith(start))


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def placed_from_study(directory: Path) -> list[tuple[str, str]]:
    """(sweep, job) of each row of a first table of run directories, in its order: the one row
    of the study's table (one folder up) with the same job number and the same values in every
    column both tables hold but the arm (named per report)."""
    rows, study = _rows(directory / RUNS), _rows(directory.parent / RUNS)
    shared = [c for c in rows[0] if c in study[0] and c not in ("sweep", "run", "arm")]
    places = []
    for row in rows:
        found = [s for s in study if s["run"] == row["sweep"] and all(s[c] == row[c] for c in shared)]
        if len(found) != 1:
            raise ValueError(f"{directory}: job {row['sweep']} is {len(found)} runs of {directory.parent / RUNS}")
        places.append((found[0]["sweep"], found[0]["run"]))
    return places


def restored(spec: dict[str, Any], md: str) -> dict[str, Any]:
    """comparison.json with what a first one lacked and its report.md says: the settings held
    fixed and, in a scaled report, the keys that change with the size."""
    spec = {**spec, "fixed": held_from_line(line(md, "Held fixed:"))}
    with_size = re.search(r"\(with (.*?), which change with it\)", line(md, "Runs from"))
    if spec["kind"] == "scaled" and with_size:
        spec["linked"] = re.findall(r"`([^`]+)`", with_size.group(1))
    return spec


def placed(directory: Path, runs: list[Run], md: str) -> None:
    """Each run of a first table of run directories placed in its sweep, as the report's "Runs
    from" line named it."""
    places = placed_from_study(directory)
    named = line(md, "Runs from").split(". ", 1)[0]
    assert set(re.findall(r"`([^`]+)`", named)) == {f"{s}/{j}" for s, j in places}, directory
    for run, (sweep, job) in zip(runs, places, strict=True):
        run.root, run.path = Path(sweep), Path(sweep) / job


def rebuild_in_place(directory: Path) -> None:
    """The report in `directory` made again from its tables (what a first table lacks restored
    from its report.md, and checked against it), written over it."""
    md = (directory / "report.md").read_text(encoding="utf-8")
    spec = json.loads((directory / SPEC).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        tables, out = Path(tmp) / "tables", Path(tmp) / "out"
        tables.mkdir()
        shutil.copyfile(directory / RUNS, tables / RUNS)
        write_text(tables / SPEC, json.dumps(spec if "fixed" in spec else restored(spec, md), indent=2) + "\n")
        _, runs, left_out = read_runs(tables)
        assert not left_out, directory
        if all(r["run"] == FIRST_RUN for r in _rows(directory / RUNS)):
            placed(directory, runs, md)
        rebuild(tables, out, plots=True, found=(runs, left_out))
        again = (out / "report.md").read_text(encoding="utf-8")
        assert line(again, "Held fixed:") == line(md, "Held fixed:"), directory
        method = line(md, "Runs from").split(". ", 1)[1]  # after the sweeps: the method, the linked keys
        assert line(again, "Runs from").split(". ", 1)[1] == method, directory
        for path in out.iterdir():
            if path.name not in KEPT:
                shutil.copyfile(path, directory / path.name)


if __name__ == "__main__":
    chosen = [Path(a).resolve() for a in sys.argv[1:]] or sorted(p.parent for p in HERE.rglob(RUNS))
    for report in chosen:
        rebuild_in_place(report)
        print(f"rebuilt {report}")
