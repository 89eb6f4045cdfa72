"""lengths.csv read back: the length-extrapolation table a plain report wrote with lengths=, as
the rows `zoo.compare.lengths.length_table` gave, for a rebuild from the report's own tables.

The perplexities were measured from checkpoints a report directory does not hold, so a rebuild
(`zoo.compare.recompute`) takes each arm's mean, spread and number of runs at each multiple from
lengths.csv (`READ`) and makes the rest again from them: the intervals, the notes, the evaluation
lengths and report.md's table. A perplexity changed in lengths.csv therefore rebuilds another
interval and another report.md line, each named as differing. The file is read by zoo's one
reader of what it reads back (`zoo.compare.table.read_table`, against `COLUMNS`): a damaged cell
is one line naming the file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.compare.table import read_table
from zoo.config.records.reader import REPORT_REMEDY, Column, DamagedRecord

LENGTHS_CSV = "lengths.csv"
NO_RUN = "no finished run"  # the note of a cell no finished run of the arm measured

# the columns a rebuild reads; the others (the arm's keys, ppl_low, ppl_high) are made again
COLUMNS = (
    Column("arm", "name"),
    Column("eval_len", "count"),
    Column("multiple", "count"),
    Column("ppl_mean", "count"),
    Column("ppl_std", "count"),
    Column("runs", "count"),
    Column("note"),
)
READ = ("ppl_mean", "ppl_std", "runs")


def read_lengths(directory: Path) -> tuple[list[int], list[dict[str, Any]]] | None:
    """(the multiples, in the report's order; per arm {"arm": its name, "cells": {multiple:
    (mean, std, n), a note such as PAST_TABLE, or None}, "trained": the trained context or
    None}) from `directory`'s lengths.csv, or None where the report has none."""
    path = Path(directory) / LENGTHS_CSV
    if not (path.exists() or path.is_symlink()):
        return None
    _, rows, _ = read_table(path, COLUMNS)
    multiples: list[int] = []
    arms: dict[str, dict[str, Any]] = {}
    for line, row in enumerate(rows, start=2):
        m, runs = row["multiple"], row["runs"]
        if not isinstance(m, int) or m < 1 or not isinstance(runs, int):
            raise DamagedRecord(
                f"{path} line {line}: multiple {m} and runs {runs} are not whole numbers (multiple >= 1); "
                f"{REPORT_REMEDY}"
            )
        if m not in multiples:
            multiples.append(m)
        arm = arms.setdefault(str(row["arm"]), {"arm": str(row["arm"]), "cells": {}, "lengths": set()})
        if row["ppl_mean"] is not None:
            arm["cells"][m] = (float(row["ppl_mean"]), float(row["ppl_std"] or 0.0), runs)
        else:
            note = row["note"]
            arm["cells"][m] = None if note in (None, NO_RUN) else str(note)
        arm["lengths"].add(row["eval_len"] / m if row["eval_len"] is not None else None)
    placed = []
    for arm in arms.values():
        trained = arm.pop("lengths")
        base = trained.pop() if len(trained) == 1 else None
        arm["trained"] = int(base) if base is not None and float(base).is_integer() else None
        arm["cells"] = {m: arm["cells"].get(m) for m in multiples}
        placed.append(arm)
    return multiples, placed


def place_lengths(arms: list, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`read_lengths`' rows with each arm's name replaced by the arm of that name, in the
    order of `arms`; an arm lengths.csv lacks has no cell measured, and a name no arm has is a
    damaged report, said on one line."""
    by_name = {row["arm"]: row for row in rows}
    unknown = [name for name in by_name if name not in {a.name for a in arms}]
    if unknown:
        raise DamagedRecord(f"{LENGTHS_CSV}: {unknown[0]!r} is no arm of runs.csv; {REPORT_REMEDY}")
    multiples = list(rows[0]["cells"]) if rows else []
    blank = {"cells": dict.fromkeys(multiples), "trained": None}
    return [{**by_name.get(a.name, blank), "arm": a} for a in arms]
