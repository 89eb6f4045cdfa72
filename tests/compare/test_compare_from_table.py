"""`zoo-compare REPORT_DIR KEY=VALUE`: a report directory holding runs.csv and comparison.json,
given alone, is compared again from its table with a key it lacked (equivalence=, pairs=all),
since a committed report's run directories are not kept. The result is the same comparison (the
same arms, baseline and numbers) with the key's section added, and `recompute=` rebuilds it; a
comparison of another kind than the table's, or the table beside other directories, is one line."""

from __future__ import annotations

import csv
from pathlib import Path

from zoo.compare.recompute import recompute

REPORTS = Path(__file__).resolve().parents[2] / "reports"
PLAIN = REPORTS / "glu_scaling" / "at_96"  # a committed plain report: GELU (arm 1) its baseline
TUNED = REPORTS / "wortsman_instability"


def _rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_a_committed_report_is_compared_again_from_its_runs_csv_with_a_margin(tmp_path, cli_here):
    out = tmp_path / "equivalence"
    result = cli_here("compare", str(PLAIN), "equivalence=0.0622", f"out={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## Equivalence within ±0.0622" in md and "![" not in md  # no curves to draw from a table
    rows, given = _rows(out / "report.csv"), _rows(PLAIN / "report.csv")
    assert [r["arm"] for r in rows] == [r["arm"] for r in given]  # the report's baseline kept
    for row, old in zip(rows, given, strict=True):
        assert {k: row[k] for k in old} == old  # every value the report had, unchanged
    readings = {r["arm"]: r["equivalence"] for r in rows if r.get("equivalence")}
    assert readings == {"arm 0": "equivalent", "arm 2": "cannot tell", "arm 3": "cannot tell"}
    lines, equal = recompute(out)
    assert equal, "\n".join(lines)


def test_a_report_table_compared_as_another_kind_or_beside_a_sweep_is_one_line(tmp_path, cli_here):
    for args, words in [
        ((str(TUNED), "equivalence=0.05"), "its runs.csv holds a tuned comparison (tune=optim.lr)"),
        ((str(TUNED), "tune=model.d_model"), "compare it with the same keys"),
        ((str(PLAIN), str(TUNED)), "compare it alone, not with other directories"),
        ((str(PLAIN), "metric=val/nope"), "metric=val/nope:"),
    ]:
        result = cli_here("compare", *args, f"out={tmp_path / 'never'}")
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr[-2000:]
        assert "Traceback" not in result.stderr and not (tmp_path / "never").exists()
