"""`zoo-compare recompute=DIR` reaches past report.md and report.csv: the tables a study's own
scripts write beside its report (signals.md, routing.md and routing_runs.csv, coord.md) are made
again from the rebuilt tables and compared line by line, a changed number named by its file, its
line and the two values; every other .md and .csv of DIR is named with what it is."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from zoo.compare.study_tables import compare_scripts, declaring_scripts, differing_lines

REPORTS = Path(__file__).resolve().parents[2] / "reports"
# each committed study script and the tables it declares
SCRIPTS = {
    "wortsman_instability/signals.py": ("signals.md",),
    "moe_scaling/routing.py": ("routing.md", "routing_runs.csv"),
    "mup_transfer/coord_check.py": ("coord.md",),
    "hybrid/recall/recall.py": ("recall.md",),
    "hybrid/recall/shared_rate/recall.py": ("recall.md",),
    "speedrun_ring/cost.py": ("cost.md",),
    "wortsman_zloss/zloss.py": ("zloss.md",),
}


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(REPORTS / name, tmp_path / name))


def _change_first_number(path: Path, after: str) -> tuple[str, str, int]:
    """The first number of `path` on a line that contains `after`, changed in its last digit:
    (old, new, line number)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    at = next(i for i, line in enumerate(lines) if after in line)
    match = re.search(r"[-+]?\d\.\d+", lines[at])
    assert match is not None, lines[at]
    old = match.group(0)
    new = old[:-1] + str((int(old[-1]) + 1) % 10)
    lines[at] = lines[at][: match.start()] + new + lines[at][match.end() :]
    path.write_text("\n".join(lines), encoding="utf-8")
    return old, new, at + 1


def test_every_committed_study_script_declares_what_it_writes():
    """A script that writes a table beside a report says so, so that recompute makes it again."""
    found = {str(p.relative_to(REPORTS)) for d in REPORTS.rglob("*") if d.is_dir() for p in declaring_scripts(d)}
    assert found == set(SCRIPTS)
    every_script = {str(p.relative_to(REPORTS)) for p in REPORTS.rglob("*.py") if p.parent != REPORTS}
    assert every_script == set(SCRIPTS), "a study script that writes no declared table"


def test_a_number_changed_in_a_scripts_table_is_refused_on_its_line(tmp_path, cli_here):
    study = _copy("wortsman_instability", tmp_path)
    result = cli_here("compare", f"recompute={study}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "signals.md: every line equals the one signals.py makes again: equal" in result.stdout
    assert (
        "trajectories.csv: measured, not rebuilt from a table (collected from each run's metrics.csv" in result.stdout
    )
    old, new, line = _change_first_number(study / "signals.md", "| 64 | qk_norm |")
    result = cli_here("compare", f"recompute={study}")
    assert result.returncode == 1
    (differs,) = [x for x in result.stdout.splitlines() if "DIFFERS" in x]
    assert differs == f"signals.md line {line}: report {new}, rebuilt {old}: DIFFERS"
    assert "1 value(s) differ from the report" in result.stdout


def test_a_number_changed_in_report_md_names_the_two_values(tmp_path, cli_here):
    study = _copy("wortsman_instability", tmp_path)
    old, new, line = _change_first_number(study / "report.md", "| arm 1 |")
    result = cli_here("compare", f"recompute={study}")
    assert result.returncode == 1
    (differs,) = [x for x in result.stdout.splitlines() if "DIFFERS" in x]
    assert differs == f"report.md line {line}: report {new}, rebuilt {old}: DIFFERS"


@pytest.mark.parametrize(
    "study, name, after",
    [
        ("moe_scaling", "routing.md", "| switch |"),
        ("moe_scaling", "routing_runs.csv", "switch,"),
        ("mup_transfer", "coord.md", "| μP |"),
    ],
)
def test_each_scripts_tables_are_made_again_and_a_change_caught(tmp_path, study, name, after):
    """compare_scripts on the committed tables (those a rebuild makes equal, as the committed
    studies' test shows): equal as committed, and one changed number found on its line."""
    directory = _copy(study, tmp_path / "given")
    scratch = Path(shutil.copytree(REPORTS / study, tmp_path / "scratch"))
    for path in scratch.glob("*"):  # a scratch holds the rebuilt report's tables, not the scripts' outputs
        if path.name not in ("runs.csv", "report.csv", "heldout.csv", "pairs.csv", "comparison.json"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    lines, differ = compare_scripts(directory, scratch)
    assert differ == 0 and any(x.startswith(f"{name}: every line equals") for x in lines), lines
    old, new, line = _change_first_number(directory / name, after)
    lines, differ = compare_scripts(directory, scratch)
    assert differ == 1 and f"{name} line {line}: report {new}, rebuilt {old}: DIFFERS" in lines, lines


def test_other_files_and_reports_beside_it_are_named_not_passed_over(tmp_path):
    directory = _copy("mup_transfer", tmp_path / "given")
    (directory / "notes.md").write_text("a note with 1.234 in it\n")
    lines, differ = compare_scripts(directory, Path(shutil.copytree(REPORTS / "mup_transfer", tmp_path / "scratch")))
    assert differ == 0
    assert "notes.md: no script here declares it: not checked" in lines
    assert "coord.csv: measured, not rebuilt from a table (trained a few steps at each width: " in "\n".join(lines)
    assert f"at_128/: a report of its own: recompute={directory / 'at_128'}" in lines
    assert "fine_grid/: a report of its own: written before runs.csv, cannot be rebuilt" in lines


def test_a_script_that_makes_other_files_is_one_line_and_one_that_fails_a_difference(tmp_path, cli_here):
    study = _copy("moe_scaling", tmp_path)
    script = study / "routing.py"
    text = script.read_text()
    script.write_text(text.replace('GENERATES = ("routing.md", "routing_runs.csv")', 'GENERATES = ("routing.md",)'))
    result = cli_here("compare", f"recompute={study}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"{script}: generate made ['routing.md', 'routing_runs.csv'], GENERATES declares ['routing.md']" in lines[0]
    script.write_text(text.replace('with (directory / "runs.csv")', 'with (directory / "gone.csv")'))
    lines, differ = compare_scripts(study, study)
    assert (
        differ == 2
        and (
            "routing.md: routing.py cannot make it from the rebuilt tables (FileNotFoundError: [Errno 2] No such file "
            "or directory: 'the rebuilt report/gone.csv'): DIFFERS"
        )
        in lines
    ), lines


def test_lines_that_differ_in_words_show_both_lines():
    lines, differ = differing_lines("x.md", "a 1.5 b\nsame\n", "a 1.5 c\nsame\nmore\n")
    assert differ == 2
    assert lines == [
        "x.md line 1: report 'a 1.5 b', rebuilt 'a 1.5 c': DIFFERS",
        "x.md line 3: report no line, rebuilt 'more': DIFFERS",
    ]


def test_a_measured_input_linked_from_outside_is_refused_on_one_line(tmp_path, cli_here):
    """coord.md is made from coord.csv, read as every table of DIR is: a link out of DIR is
    refused, its target never read."""
    study = _copy("mup_transfer", tmp_path)
    outside = tmp_path / "elsewhere.csv"
    shutil.move(study / "coord.csv", outside)
    (study / "coord.csv").symlink_to(outside)
    result = cli_here("compare", f"recompute={study}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert str(study / "coord.csv") in lines[0]
