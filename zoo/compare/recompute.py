"""`zoo-compare recompute=DIR`: rebuild a report from its runs.csv alone and say, value by value,
whether what it rebuilds equals what the report says (to the precision the report prints).

The runs of runs.csv (`zoo.compare.table.read_runs`) go through the same comparison as the
sweep's run directories did (same kind, metric, keys and baseline, from comparison.json), into
a scratch directory; its report.csv (and heldout.csv, pairs.csv) is then read beside DIR's, row
by row and column by column (a column the report lacks is a difference), and its report.md line
by line, since a report rebuilds byte for byte from its tables (`as_rebuilt` sets aside what
runs.csv does not hold: the plots, an unfinished run's last validation, and the length table of a
report without lengths.csv). A lengths= report's length table is made again from the means,
spreads and runs its lengths.csv holds (`zoo.compare.committed_lengths`: measured from checkpoints),
and lengths.csv compared value by value like report.csv. The
tables a study's own scripts write beside its report (signals.md, routing.md, coord.md) are made
again by those scripts from the rebuilt tables and compared the same way
(`zoo.compare.study_tables`), and every other .md and .csv there is named with what it is.
Every interval, p-value, mean, spread, fit and multiplier of the report is rebuilt this way: a
reviewer who doubts one can follow it from the per-run values, and one who doubts the code can
recompute those values by other means from the same table. Every file is read by zoo's one
reader of what it reads back (`zoo.config.records.reader`), runs.csv and comparison.json against
their schemas (`zoo.compare.table.read_runs`): a link out of DIR, a damaged figure, a missing
column or a field of the wrong type is one line, never a value taken as it came."""

from __future__ import annotations

import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from zoo.compare.committed_lengths import LENGTHS_CSV, READ, RULE, read_lengths
from zoo.compare.errors import CompareError
from zoo.compare.noise import LAST_K
from zoo.compare.report import compare
from zoo.compare.runs import Run
from zoo.compare.scale import compare_scaled
from zoo.compare.study_tables import compare_scripts, differing_lines
from zoo.compare.table import HELDOUT, PAIRS, RUNS, SPEC, read_runs, read_table
from zoo.compare.transfer import DECISIONS, EXTRAPOLATION
from zoo.compare.tune import compare_tuned
from zoo.config.records.reader import REPORT_REMEDY, read_text

# columns shown line by line (every column is compared; these are the report's numbers)
SHOWN = (
    "mean",
    "std",
    "held_out mean",
    "diff",
    "ci_low",
    "ci_high",
    "adj_low",
    "adj_high",
    "p",
    "p_holm",
    "flag",
    "sensitivity",
    "sensitivity_low",
    "sensitivity_high",
    "exponent",
    "exponent_low",
    "exponent_high",
    "multiplier",
    "multiplier_low",
    "multiplier_high",
    "ppl_low",
    "ppl_high",
)


def printed(column: str, value: Any) -> str:
    """`value` as the report prints a value of `column` (the precision two values must share)."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if column in ("p", "p_holm"):
        return "<0.001" if value < 0.001 else f"{value:.3f}"
    if column.startswith("multiplier"):
        return f"{value:.2g}" if value >= 100 else f"{value:.2f}"
    if column == "df":
        return f"{value:.3g}"
    if abs(value) >= 1e4:
        return f"{value:.6g}"
    return f"{value:+.4f}" if column in ("diff", "ci_low", "ci_high", "adj_low", "adj_high") else f"{value:.4f}"


def rebuild(
    directory: Path, out: Path, *, plots: bool = False, found: tuple[list[Run], list[Run]] | None = None
) -> dict:
    """The report in `directory` made again, into `out`, from its runs.csv and comparison.json
    alone (whose content it returns): the report the run directories gave, with the same arms,
    named alike, the same runs and the same settings held fixed. `found`: (runs, runs left out)
    as read from its runs.csv and completed by the caller, instead of the table's own."""
    spec, runs, left_out = read_runs(directory)
    if found is not None:
        runs, left_out = found
    if not runs:
        raise CompareError(f"recompute={directory}: {RUNS} holds no run of an arm")
    common = dict(metric=spec["metric"], baseline=spec["baseline"], plots=plots, found=(runs, left_out))
    dirs = [Path(str(name)) for name in dict.fromkeys(str(r.root) for r in runs)]
    pairs = bool(spec.get("pairs"))
    margin, target, k = spec.get("equivalence"), spec.get("threshold"), spec.get("last_k") or LAST_K
    if spec["kind"] == "plain":
        measured = read_lengths(directory)  # lengths=: perplexities measured from checkpoints
        multiples, length_rows = measured if measured is not None else (None, None)
        compare(
            dirs,
            out,
            pairs=pairs,
            equivalence=margin,
            threshold=target,
            last_k=k,
            lengths=multiples,
            length_rows=length_rows,
            **common,
        )
    elif spec["kind"] == "tuned":
        compare_tuned(
            dirs, out, key=spec["tune"], pairs=pairs, equivalence=margin, threshold=target, last_k=k, **common
        )
    else:  # "scaled": read_spec admits these three kinds
        compare_scaled(
            dirs,
            out,
            key=spec["scale"],
            tune=spec.get("tune"),
            irreducible=spec.get("irreducible"),
            linked=spec.get("linked"),
            agree=spec.get("agree"),
            equivalence=margin,
            threshold=target,
            last_k=k,
            **common,
        )
    return spec


def _compare_columns(name: str, ours: list[str], theirs: list[str]) -> list[str]:
    """A line for each column the rebuilt table has and the report's lacks, or the other way
    round: a column deleted from a report is a difference, never a column passed over."""
    missing = [f"{name}: column {c} is not in the report: DIFFERS" for c in ours if c not in theirs]
    return missing + [f"{name}: column {c} is not in the rebuilt one: DIFFERS" for c in theirs if c not in ours]


def _compare_tables(
    name: str, ours: tuple[list[str], list[dict]], theirs: tuple[list[str], list[dict]], key_columns: list[str]
) -> tuple[list[str], int]:
    """Lines saying, per row and shown column, the report's value and the rebuilt one; and how
    many values differ (every column of either table is compared, shown or not)."""
    lines = _compare_columns(name, ours[0], theirs[0])
    differ = len(lines)
    if len(ours[1]) != len(theirs[1]):
        return [
            *lines,
            f"{name}: the report has {len(theirs[1])} rows, the rebuilt one {len(ours[1])}: DIFFERS",
        ], differ + 1
    for mine, given in zip(ours[1], theirs[1]):
        label = " ".join(str(given.get(k)) for k in key_columns if k in given)
        for column in given:
            if column not in mine:
                continue
            a, b = printed(column, given[column]), printed(column, mine[column])
            same = a == b
            differ += not same
            base = (
                column.rsplit(" ", 1)[-1]
                if column.endswith((" mean", " std")) and column != "held_out mean"
                else column
            )
            if not same or base in SHOWN:
                lines.append(f"{name} {label} {column}: report {a}, rebuilt {b}: {'equal' if same else 'DIFFERS'}")
    return lines, differ


def _table(path: Path, root: Path) -> tuple[list[str], list[dict]]:
    head, rows, _ = read_table(path, root=root)
    return head, rows


# what the rebuild cannot draw from runs.csv: the plots (each a line of its own), the length
# table (measured from the checkpoints) of a report without lengths.csv and an unfinished run's
# last validation (its metrics.csv)
IMAGE = re.compile(r"\n\n!\[[^\]\n]*\]\([^)\n]*\)")
LENGTHS = "## Length extrapolation"
LAST_VALIDATION = re.compile(r"^(- `.*` unfinished) \(last validation [^()\n]* at [\d,]+ tokens\)$", re.M)


def as_rebuilt(md: str, *, lengths: bool = False) -> str:
    """report.md without what a rebuild from runs.csv cannot make (`IMAGE`, `LENGTHS`,
    `LAST_VALIDATION`): the rest is made again byte for byte. `lengths`: the report has its
    lengths.csv, from which the `LENGTHS` table is made again too."""
    md = LAST_VALIDATION.sub(r"\1", IMAGE.sub("", md))
    if lengths or f"\n{LENGTHS}\n" not in md:
        return md
    before, _, after = md.partition(f"\n\n{LENGTHS}\n")
    rest = after.split("\n## ", 1)
    return before + ("\n\n## " + rest[1] if len(rest) > 1 else "\n")


def _compare_markdown(ours: Path, theirs: Path, root: Path) -> tuple[list[str], int]:
    """report.md, line by line, against the one rebuilt from the same tables (`as_rebuilt`)."""
    if not os.path.lexists(theirs):
        return ["report.md: not in the report: DIFFERS"], 1
    given = read_text(theirs, root=root, remedy=REPORT_REMEDY)
    table = os.path.lexists(theirs.parent / LENGTHS_CSV)
    said = (
        f"report.md: the {LENGTHS[3:].lower()} table is rebuilt from {LENGTHS_CSV}'s {', '.join(READ)} "
        "(measured from checkpoints), as are that table's intervals"
        if table
        else f"report.md: the {LENGTHS[3:].lower()} table is measured from checkpoints, not rebuilt"
    )
    lines = [said] * (f"\n{LENGTHS}\n" in given)
    more, differ = differing_lines("report.md", as_rebuilt(given, lengths=table), ours.read_text(encoding="utf-8"))
    return lines + more, differ


def recompute(directory: Path) -> tuple[list[str], bool]:
    """(lines, every value equal) for the report in `directory` rebuilt from its runs.csv: its
    tables value by value and column by column, its report.md line by line."""
    directory = Path(directory)
    missing = [n for n in (RUNS, SPEC, "report.csv") if not os.path.lexists(directory / n)]
    if missing:
        raise CompareError(
            f"recompute={directory}: no {missing[0]} there; a report written before zoo-compare "
            f"wrote {RUNS} cannot be rebuilt: run zoo-compare on its sweeps again"
        )
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        return compare_rebuilt(directory, scratch, rebuild(directory, scratch))


def compare_rebuilt(directory: Path, scratch: Path, spec: dict) -> tuple[list[str], bool]:
    """`recompute`'s answer for the report in `directory` and its rebuild in `scratch` (what
    `rebuild(directory, scratch)` made, returning `spec`)."""
    keys = ["arm", *([spec["scale"]] if spec.get("scale") else [])]
    lines, differ = _compare_tables(
        "report.csv", _table(scratch / "report.csv", scratch), _table(directory / "report.csv", directory), keys
    )
    tables = [(HELDOUT, [*keys, "seed"]), (PAIRS, ["arm", "other"])]
    tables += [(DECISIONS, [*keys[1:], "pair"]), (EXTRAPOLATION, ["arm"])]  # scale=: decisions across sizes
    tables.append((LENGTHS_CSV, ["arm", RULE, "multiple"]))  # lengths=: its intervals rebuilt from its means
    for name, columns in tables:
        if (scratch / name).is_file() or os.path.lexists(directory / name):
            if not os.path.lexists(directory / name):
                lines.append(f"{name}: not in the report: DIFFERS")
                differ += 1
            elif not (scratch / name).is_file():
                lines.append(f"{name}: the report has it, the rebuilt one does not: DIFFERS")
                differ += 1
            else:
                more, n = _compare_tables(
                    name, _table(scratch / name, scratch), _table(directory / name, directory), columns
                )
                lines += more
                differ += n
    more, n = _compare_markdown(scratch / "report.md", directory / "report.md", directory)
    lines += more
    differ += n
    more, n = compare_scripts(directory, scratch)
    lines += more
    differ += n
    lines.append(
        f"{'every value equals the report' if not differ else f'{differ} value(s) differ from the report'} "
        f"(rebuilt from {directory / RUNS})"
    )
    return lines, not differ
