"""`zoo-compare recompute=DIR`: rebuild a report from its runs.csv alone and say, value by value,
whether what it rebuilds equals what the report says (to the precision the report prints).

The runs of runs.csv (`zoo.compare.table.read_runs`) go through the same comparison as the
sweep's run directories did (same kind, metric, keys and baseline, from comparison.json), into
a scratch directory; its report.csv (and heldout.csv) is then read beside DIR's, row by row.
Every interval, p-value, mean, spread, fit and multiplier of the report is rebuilt this way: a
reviewer who doubts one can follow it from the per-run values, and one who doubts the code can
recompute those values by other means from the same table."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from zoo.compare.errors import CompareError
from zoo.compare.report import compare
from zoo.compare.runs import Run
from zoo.compare.scale import compare_scaled
from zoo.compare.table import HELDOUT, PAIRS, RUNS, SPEC, read_runs, read_table
from zoo.compare.tune import compare_tuned

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
    if spec["kind"] == "plain":
        compare(dirs, out, pairs=pairs, **common)
    elif spec["kind"] == "tuned":
        compare_tuned(dirs, out, key=spec["tune"], pairs=pairs, **common)
    elif spec["kind"] == "scaled":
        compare_scaled(
            dirs,
            out,
            key=spec["scale"],
            tune=spec.get("tune"),
            irreducible=spec.get("irreducible"),
            linked=spec.get("linked"),
            **common,
        )
    else:
        raise CompareError(f"recompute={directory}: {SPEC} names an unknown kind of report {spec['kind']!r}")
    return spec


def _compare_tables(name: str, ours: list[dict], theirs: list[dict], key_columns: list[str]) -> tuple[list[str], int]:
    """Lines saying, per row and shown column, the report's value and the rebuilt one; and how
    many values differ (every column both tables hold is compared, shown or not)."""
    if len(ours) != len(theirs):
        return [f"{name}: the report has {len(theirs)} rows, the rebuilt one {len(ours)}: DIFFERS"], 1
    lines, differ = [], 0
    for mine, given in zip(ours, theirs):
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


def recompute(directory: Path) -> tuple[list[str], bool]:
    """(lines, every value equal) for the report in `directory` rebuilt from its runs.csv."""
    directory = Path(directory)
    missing = [n for n in (RUNS, SPEC, "report.csv") if not (directory / n).is_file()]
    if missing:
        raise CompareError(
            f"recompute={directory}: no {missing[0]} there; a report written before zoo-compare "
            f"wrote {RUNS} cannot be rebuilt: run zoo-compare on its sweeps again"
        )
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        spec = rebuild(directory, scratch)
        keys = ["arm", *([spec["scale"]] if spec.get("scale") else [])]
        lines, differ = _compare_tables(
            "report.csv", read_table(scratch / "report.csv"), read_table(directory / "report.csv"), keys
        )
        for name, columns in ((HELDOUT, [*keys, "seed"]), (PAIRS, ["arm", "other"])):
            if (scratch / name).is_file() or (directory / name).is_file():
                if not (directory / name).is_file():
                    lines.append(f"{name}: not in the report: DIFFERS")
                    differ += 1
                else:
                    more, n = _compare_tables(name, read_table(scratch / name), read_table(directory / name), columns)
                    lines += more
                    differ += n
    lines.append(
        f"{'every value equals the report' if not differ else f'{differ} value(s) differ from the report'} "
        f"(rebuilt from {directory / RUNS})"
    )
    return lines, not differ
