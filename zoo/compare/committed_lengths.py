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
RULE = "rope_scaling"  # the column of a row evaluated with a RoPE context-extension rule (empty: as trained)

# the columns a rebuild reads; the others (the arm's keys, ppl_low, ppl_high) are made again
COLUMNS = (
    Column("arm", "name"),
    Column(RULE, required=False),  # a report written before extend= has none
    Column("eval_len", "count"),
    Column("multiple", "count"),
    Column("ppl_mean", "count"),
    Column("ppl_std", "count"),
    Column("runs", "count"),
    Column("note"),
)
READ = ("ppl_mean", "ppl_std", "runs")


def row_label(row: dict[str, Any]) -> str:
    """A length row's name in report.md, lengths.png and the refusals: its arm's, with the RoPE
    rule it was evaluated with (`arm 4 + yarn`)."""
    arm = row["arm"]
    name = arm if isinstance(arm, str) else arm.name
    return f"{name} + {row['rule']}" if row.get("rule") else name


def read_lengths(directory: Path) -> tuple[list[int], list[dict[str, Any]]] | None:
    """(the multiples, in the report's order; per arm and rule {"arm": its name, "rule": the RoPE
    rule or None, "cells": {multiple: (mean, std, n), a note such as PAST_TABLE, or None},
    "trained": the trained context or None}) from `directory`'s lengths.csv, or None where the
    report has none."""
    path = Path(directory) / LENGTHS_CSV
    if not (path.exists() or path.is_symlink()):
        return None
    _, rows, _ = read_table(path, COLUMNS)
    multiples: list[int] = []
    arms: dict[str, dict[str, Any]] = {}  # by arm and rule
    for line, row in enumerate(rows, start=2):
        m, runs = row["multiple"], row["runs"]
        if not isinstance(m, int) or m < 1 or not isinstance(runs, int):
            raise DamagedRecord(
                f"{path} line {line}: multiple {m} and runs {runs} are not whole numbers (multiple >= 1); "
                f"{REPORT_REMEDY}"
            )
        if m not in multiples:
            multiples.append(m)
        rule = str(row[RULE]) if row.get(RULE) else None
        arm = arms.setdefault(
            f"{row['arm']}\0{rule}", {"arm": str(row["arm"]), "rule": rule, "cells": {}, "lengths": set()}
        )
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
    order of `arms` (the rows as trained, then each rule's, as lengths.csv lists them); an arm
    lengths.csv lacks has no cell measured, and a name no arm has is a damaged report, said on
    one line."""
    known = {a.name: a for a in arms}
    unknown = [row["arm"] for row in rows if row["arm"] not in known]
    if unknown:
        raise DamagedRecord(f"{LENGTHS_CSV}: {unknown[0]!r} is no arm of runs.csv; {REPORT_REMEDY}")
    multiples = list(rows[0]["cells"]) if rows else []
    blank = {"rule": None, "cells": dict.fromkeys(multiples), "trained": None}
    plain = {row["arm"]: row for row in rows if not row.get("rule")}
    placed = [{**plain.get(a.name, blank), "arm": a} for a in arms]
    rules = list(dict.fromkeys(row["rule"] for row in rows if row.get("rule")))
    for rule in rules:
        of_rule = {row["arm"]: row for row in rows if row.get("rule") == rule}
        placed += [{**of_rule[a.name], "arm": a} for a in arms if a.name in of_rule]
    return placed
