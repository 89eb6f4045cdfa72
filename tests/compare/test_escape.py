"""A report copies run values as data: a config value with pipes, backticks, line breaks or HTML
keeps the table's shape and plants no markup; a CSV cell that starts like a formula is
neutralised; a finished run with a non-finite or negative figure is damaged, not reported."""

from __future__ import annotations

import csv
import json
import re
import shutil

import pytest
import yaml

from tests.cli.conftest import tiny_overrides, zoo_train
from zoo.compare.escape import code, csv_cell, text

PLANTED = ["x|y`z\n<img src=x onerror=alert(1)>", '=HYPERLINK("http://example.com","click")', "``|``"]


def _cells(row: str) -> list[str]:
    """The cells of a GitHub table row: split on pipes not escaped with a backslash."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


@pytest.mark.parametrize("value", PLANTED + ["plain", "`a`", "a\\|b", ""])
def test_a_code_span_is_one_cell_on_one_line_and_shows_the_value(value):
    span = code(value)
    assert "\n" not in span and len(_cells(f"| {span} |")) == 1
    fence = re.match(r"`+", span).group()
    inner = span[len(fence) : -len(fence)]
    assert span.endswith(fence) and all(len(run) < len(fence) for run in re.findall(r"`+", inner))
    shown = inner.strip(" ") if inner.startswith(" ") and inner.endswith(" ") else inner
    assert shown.replace("\\|", "|") == value.replace("\n", "\\n")


def test_text_makes_html_and_markup_inert():
    out = text("<script>alert(1)</script> [link](http://e) *bold* a|b")
    assert "<" not in out and "\\[" in out and "\\*" in out and "\\|" in out


@pytest.mark.parametrize(
    "value, cell",
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-cmd", "'-cmd"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("plain", "plain"),
        (-0.5, -0.5),
        (None, None),
    ],
)
def test_a_csv_cell_that_starts_like_a_formula_is_quoted(value, cell):
    assert csv_cell(value) == cell


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("escape") / "run"
    result = zoo_train(*tiny_overrides(run))
    assert result.returncode == 0, result.stderr[-2000:]
    return run


def _plant(run, value):
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    config["model"]["norm_eps"] = value
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))


@pytest.mark.slow
def test_planted_values_keep_the_report_whole_and_damaged_figures_are_named(one_run, tmp_path):
    from zoo.compare.report import compare

    sweep = tmp_path / "sweep"
    for i, value in enumerate([1e-5, *PLANTED]):
        shutil.copytree(one_run, sweep / str(i))
        _plant(sweep / str(i), value)
    for name, value in (("nan", float("nan")), ("negative", -1.0), ("huge", 1e308)):
        shutil.copytree(one_run, sweep / name)
        summary = json.loads((sweep / name / "summary.json").read_text())
        summary["metrics"]["val/loss"] = value
        (sweep / name / "summary.json").write_text(json.dumps(summary))
    report = compare([sweep], sweep / "compare")
    md = (sweep / "compare" / "report.md").read_text()
    outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", md)  # markdown shows a code span's HTML as text
    assert "<img" not in outside_code and "<img" in md
    table = [ln for ln in md.splitlines() if ln.startswith("| arm ")]
    width = len(_cells(table[0]))
    body = md.split(table[0], 1)[1].split("\n\n", 1)[0].splitlines()[2:]  # after the header and the rule
    assert len(body) == 4 and all(len(_cells(row)) == width for row in body), body
    with (sweep / "compare" / "report.csv").open(newline="") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert not any(cell.startswith(("=", "+", "@")) for cell in cells)
    assert '\'=HYPERLINK("http://example.com","click")' in cells
    damaged = {r.path.name: r.error for a in report.arms for r in a.runs if r.status.value == "damaged"}
    assert set(damaged) == {"nan", "negative", "huge"}
    assert "val/loss is nan" in damaged["nan"] and "negative" in damaged["negative"]


# config key names a run's .hydra/config.yaml can hold: markup, a table's pipe, backticks, a link,
# and a name a spreadsheet would run as a formula
PLANTED_KEYS = ["<img src=x onerror=alert(2)>", "a|b`c", "[click](javascript:alert(3))", "=1+2"]


def _plant_keys(run, i):
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    for key in PLANTED_KEYS:
        config["model"][key] = i  # a key whose value differs between the arms: a column of the table
    config['=HYPERLINK("http://example.com")'] = i  # at the top level: the CSV column starts with =
    config["model"]["norm_eps"] = f"[x](javascript:alert({i})) <b>{i}</b>"
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))


@pytest.mark.slow
def test_planted_keys_are_escaped_in_every_table_heading_warning_and_csv_header(one_run, tmp_path):
    from zoo.compare.report import compare
    from zoo.compare.tune import compare_tuned

    sweep = tmp_path / "sweep"
    for i in range(3):
        shutil.copytree(one_run, sweep / str(i))
        _plant_keys(sweep / str(i), i)
    compare([sweep], sweep / "compare", plots=False)
    compare_tuned([sweep], sweep / "tuned", key="model.norm_eps", plots=False)  # each arm tried one value: warned
    for name in ("compare", "tuned"):
        md = (sweep / name / "report.md").read_text()
        outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", md)
        assert "<img" not in outside_code and "<b>" not in outside_code, name
        assert not re.search(r"(?<!\\)\]\(javascript:", outside_code), name  # no link: its brackets are escaped
        table = [ln for ln in md.splitlines() if ln.startswith("| arm ")]
        width = len(_cells(table[0]))
        body = md.split(table[0], 1)[1].split("\n\n", 1)[0].splitlines()[2:]
        assert len(body) == 3 and all(len(_cells(row)) == width for row in body), (name, table[0], body)
        assert "&lt;img src=x onerror=alert(2)&gt;" in table[0] and "a\\|b\\`c" in table[0], table[0]
        with (sweep / name / "report.csv").open(newline="") as handle:
            header = next(csv.reader(handle))
        assert not any(cell.startswith(("=", "+", "@")) for cell in header), header
        assert '\'=HYPERLINK("http://example.com")' in header and "model.<img src=x onerror=alert(2)>" in header
    warnings = (sweep / "tuned" / "report.md").read_text().split("## Warnings", 1)[1]
    assert "only model.norm_eps=\\[x\\](javascript:alert(0)) &lt;b&gt;0&lt;/b&gt; was tried" in warnings
