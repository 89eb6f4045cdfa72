"""`zoo-compare recompute=` of a report made with lengths=: the length table's perplexities were
measured from checkpoints, so the rebuild reads each arm's mean, spread and runs from the report's
lengths.csv and makes its intervals and report.md's table again. A perplexity changed in
lengths.csv is caught; a cell no run measured keeps its note; a report without lengths.csv is
rebuilt as before; a damaged lengths.csv is one line."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from zoo.compare.recompute import recompute

LENGTHS = Path(__file__).resolve().parents[2] / "reports" / "hybrid" / "lengths_32"  # plain, lengths=1,2,4


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(LENGTHS, tmp_path / LENGTHS.name))


def _edit_lengths(report: Path, column: str, value: str, row: int) -> str:
    """Set `column` of data row `row` of lengths.csv to `value`; return what it held."""
    path = report / "lengths.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    at = rows[0].index(column)
    before, rows[row][at] = rows[row][at], value
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return before


def test_the_committed_length_table_rebuilds_value_by_value(tmp_path):
    lines, equal = recompute(LENGTHS)
    assert equal, "\n".join(lines)
    shown = [line for line in lines if line.startswith("lengths.csv ")]
    assert len(shown) == 2 * 15, shown  # ppl_low and ppl_high of 5 arms at 3 multiples
    assert "lengths.csv arm 0 2 ppl_low: report 6.2885, rebuilt 6.2885: equal" in shown
    assert any(
        line.startswith("report.md: the length extrapolation table is rebuilt from lengths.csv") for line in lines
    )
    assert not any(line.startswith("lengths.csv: ") and "not checked" in line for line in lines), lines


def test_a_perplexity_changed_in_lengths_csv_is_named_as_differing(tmp_path):
    """arm 0's mean perplexity at 2x moved by 0.1 (6.49 -> 6.59): its interval no longer centres
    on it and report.md's cell no longer prints it; each is one DIFFERS line naming arm 0 at 2x."""
    report = _copy(tmp_path)
    with (report / "lengths.csv").open(encoding="utf-8") as handle:
        before = list(csv.DictReader(handle))[1]["ppl_mean"]
    _edit_lengths(report, "ppl_mean", str(float(before) + 0.1), 2)
    lines, equal = recompute(report)
    assert not equal
    differ = [line for line in lines if "DIFFERS" in line]
    assert sorted(line.split(":")[0] for line in differ if line.startswith("lengths.csv")) == [
        "lengths.csv arm 0 2 ppl_high",
        "lengths.csv arm 0 2 ppl_low",
    ], differ
    (md,) = [line for line in differ if line.startswith("report.md line ")]
    assert md.startswith("report.md line ") and "report 6.49, rebuilt 6.59: DIFFERS" in md, md
    assert lines[-1].startswith("3 value(s) differ from the report")


def test_a_report_without_lengths_csv_sets_its_length_table_aside_as_before(tmp_path):
    report = _copy(tmp_path)
    (report / "lengths.csv").unlink()
    lines, equal = recompute(report)
    assert equal, "\n".join(lines)
    assert "report.md: the length extrapolation table is measured from checkpoints, not rebuilt" in lines
    assert not any(line.startswith("lengths.csv") for line in lines)


@pytest.mark.parametrize(
    "column, value, fragment",
    [
        ("multiple", "two", "lengths.csv, line 3, column multiple: 'two' is not a number"),
        ("ppl_mean", "nan", "lengths.csv, line 3, column ppl_mean: nan is not a finite figure of a run"),
        ("multiple", "1.5", "lengths.csv line 3: multiple 1.5 and runs 3 are not whole numbers"),
        ("arm", "arm 9", "lengths.csv: 'arm 9' is no arm of runs.csv"),
    ],
)
def test_a_damaged_lengths_csv_is_one_line(tmp_path, cli_here, column, value, fragment):
    report = _copy(tmp_path)
    _edit_lengths(report, column, value, 2)
    result = cli_here("compare", f"recompute={report}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("note, cell", [("past the learned table", "past the learned table"), ("no finished run", "–")])
def test_a_cell_no_run_measured_rebuilds_with_its_note(tmp_path, note, cell):
    """A cell with no perplexity (a learned position table too short for 4x, or no finished
    run) is written with its note and no values; the rebuild reads the note back and prints the
    cell as the report does. The note deleted is a difference (the writer always writes one)."""
    report = _copy(tmp_path)
    for column, value in (("ppl_mean", ""), ("ppl_std", ""), ("ppl_low", ""), ("ppl_high", ""), ("runs", "0")):
        _edit_lengths(report, column, value, 3)  # arm 0 at 4x
    _edit_lengths(report, "note", note, 3)
    md = (report / "report.md").read_text(encoding="utf-8")
    (report / "report.md").write_text(md.replace("| 8.24 [8.10, 8.39] |", f"| {cell} |", 1), encoding="utf-8")
    lines, equal = recompute(report)
    assert equal, "\n".join(lines)
    _edit_lengths(report, "note", "", 3)  # the note deleted: the writer never leaves it empty
    lines, equal = recompute(report)
    assert not equal and any(line.startswith("lengths.csv arm 0 4 note: report –") for line in lines), lines
