"""runs.csv and `zoo-compare recompute=DIR`: every kind of report (plain, tune=, scale=, scale=
with tune=) made from a synthetic sweep writes one row per run, and rebuilds every value of its
report.csv and heldout.csv from runs.csv alone; a report whose numbers were changed is caught
(exit status 1). The committed studies in reports/ were written before runs.csv existed: each is
either rebuilt equal or refused on one line naming the missing runs.csv."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest

from tests.compare.sweeps import VOCAB, write_sweep
from zoo.compare.recompute import recompute

RATES = (1e-3, 3e-3, 1e-2)
REPORTS = Path(__file__).resolve().parents[2] / "reports"


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _loss(config: dict) -> float:
    """A deterministic loss with seed noise that differs by arm, rate and size."""
    seed, lr = config["seed"], config.get("optim.lr", 3e-3)
    width = config.get("model.d_model", 32)
    norm = ("pre", "post", "sandwich").index(config.get("model.norm", "pre"))
    return (
        4.2
        - 0.4 * math.log(width / 16) / math.log(4)
        + (0.07, 0.0, -0.03)[norm]
        + 0.3 * abs(math.log10(lr / 3e-3))
        + 0.013 * ((seed * 7 + norm * 3 + int(width) + int(lr * 1e4)) % 5)
        + 0.002 * seed
    )


def _sweep(root: Path, *, widths=(32,), rates=(3e-3,), seeds=(0, 1, 2), fail=()) -> Path:
    runs = []
    for norm in ("pre", "post", "sandwich"):
        for width in widths:
            for lr in rates:
                for seed in seeds:
                    config = {"model.norm": norm, "model.d_model": width, "optim.lr": lr, "seed": seed}
                    runs.append((config, None if (norm, width, lr, seed) in fail else _loss(config)))
    return write_sweep(
        root,
        runs,
        flops=lambda c: 100 * c["model.d_model"] ** 2,
        params=lambda c: 12 * c["model.d_model"] ** 2,
        tokens=lambda c: 400 * c["model.d_model"],
    )


CASES = {
    "plain": dict(sweep=dict(fail={("post", 32, 3e-3, 1)}), call=dict()),
    "tuned": dict(sweep=dict(rates=RATES, fail={("post", 32, 1e-2, 2)}), call=dict(tune="optim.lr")),
    "scaled": dict(sweep=dict(widths=(16, 32, 64)), call=dict(scale="model.d_model")),
    "scaled_tuned": dict(
        sweep=dict(widths=(16, 32, 64), rates=RATES, fail={("sandwich", 64, 3e-3, 0)}),
        call=dict(scale="model.d_model", tune="optim.lr"),
    ),
}


def _report(tmp_path: Path, case: str) -> tuple[Path, Path]:
    from zoo.compare.report import compare
    from zoo.compare.scale import compare_scaled
    from zoo.compare.tune import compare_tuned

    spec = CASES[case]
    sweep = _sweep(tmp_path / "sweep", **spec["sweep"])
    out = tmp_path / "report"
    call = spec["call"]
    if "scale" in call:
        compare_scaled([sweep], out, key=call["scale"], tune=call.get("tune"), plots=False)
    elif "tune" in call:
        compare_tuned([sweep], out, key=call["tune"], plots=False)
    else:
        compare([sweep], out, plots=False)
    return sweep, out


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_report_rebuilds_from_its_runs_csv(tmp_path, case):
    sweep, out = _report(tmp_path, case)
    runs = _rows(out / "runs.csv")
    jobs = sorted(p.name for p in sweep.iterdir())
    assert sorted(r["run"] for r in runs) == jobs and {r["sweep"] for r in runs} == {"sweep"}
    for row in runs:  # each row is its run's own record
        summary_file = sweep / row["run"] / "summary.json"
        if summary_file.is_file():
            summary = json.loads(summary_file.read_text())
            assert float(row["val/loss"]) == summary["metrics"]["val/loss"] and row["status"] == "finished"
            assert float(row["N"]) == summary["model"]["non_embedding_params"]
            assert float(row["D"]) == summary["tokens_seen"] and float(row["vocab_size"]) == VOCAB
            assert float(row["compute"]) == 3 * summary["model"]["flops_per_token"] * summary["tokens_seen"]
        else:
            assert row["status"] == "failed" and row["val/loss"] == "" and "loss is nan" in row["error"]
        assert row["arm"].startswith("arm ") and row["seed"] in ("0", "1", "2") and float(row["optim.lr"]) in RATES
    assert (out / "heldout.csv").is_file() == ("tune" in CASES[case]["call"])
    lines, equal = recompute(out)
    assert equal, "\n".join(lines)
    assert lines[-1].startswith("every value equals the report")
    shown = [line for line in lines if line.startswith("report.csv arm 1")]
    assert any(" ci_low: " in line or " multiplier_low: " in line for line in shown), lines


def test_a_changed_interval_is_caught_and_the_command_exits_1(tmp_path, cli_here):
    _, out = _report(tmp_path, "tuned")
    result = cli_here("compare", f"recompute={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "report.csv arm 1 ci_low: report " in result.stdout and "every value equals the report" in result.stdout
    rows = _rows(out / "report.csv")
    rows[1]["ci_low"] = str(float(rows[1]["ci_low"]) - 0.001)  # one interval moved by 0.001
    with (out / "report.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = cli_here("compare", f"recompute={out}")
    assert result.returncode == 1
    (line,) = [line for line in result.stdout.splitlines() if "DIFFERS" in line]
    assert line.startswith("report.csv arm 1 ci_low: report ") and "1 value(s) differ" in result.stdout
    held = _rows(out / "heldout.csv")
    held[0]["val/loss"] = "9.5"
    with (out / "heldout.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(held[0]))
        writer.writeheader()
        writer.writerows(held)
    lines, equal = recompute(out)
    assert not equal and any(line.startswith("heldout.csv arm 0") and "DIFFERS" in line for line in lines)


def test_recompute_takes_nothing_else_and_refuses_a_directory_without_runs_csv(tmp_path, cli_here):
    _, out = _report(tmp_path, "plain")
    for args, words in [
        ((f"recompute={out}", "tune=optim.lr"), "recompute=DIR takes nothing else"),
        ((f"recompute={tmp_path / 'nope'}",), "not a directory"),
        ((f"recompute={tmp_path / 'sweep'}",), "no runs.csv there"),
    ]:
        result = cli_here("compare", *args)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr


# a study with runs.csv is rebuilt once, by test_each_committed_report_with_a_runs_csv_is_the_one_its_tables_rebuild,
# which asks recompute's comparison of it too (a scaled study's rebuild refits its 1,000 resamples)
OLDER = sorted(p.parent for p in REPORTS.rglob("report.csv") if not (p.parent / "runs.csv").is_file())


@pytest.mark.parametrize("study", OLDER, ids=[str(p.relative_to(REPORTS)) for p in OLDER])
def test_a_committed_study_without_runs_csv_is_said_to_need_a_rerun(study):
    """A study written before runs.csv existed holds each arm's mean and spread only, so no
    interval of it can be rebuilt: recompute says so."""
    from zoo.compare.errors import CompareError

    with pytest.raises(CompareError, match="no runs.csv there; a report written before"):
        recompute(study)


def test_a_reviewer_recomputes_the_tuned_interval_from_the_tables_with_scipy(tmp_path):
    """The held-out values in heldout.csv, paired over seeds, give the report's interval and
    p-value through SciPy's own t-test (code nobody here wrote)."""
    stats = pytest.importorskip("scipy.stats", reason="SciPy is the independent reference")
    _, out = _report(tmp_path, "tuned")
    held: dict = {}
    for row in _rows(out / "heldout.csv"):
        held.setdefault(row["arm"], {})[int(row["seed"])] = float(row["val/loss"])
    runs = _rows(out / "runs.csv")
    for row in _rows(out / "report.csv")[1:]:
        arm, base = held[row["arm"]], held["arm 0"]
        seeds = sorted(arm)
        deltas = [arm[s] - base[s] for s in seeds]
        test = stats.ttest_rel([arm[s] for s in seeds], [base[s] for s in seeds])
        low, high = stats.t.interval(0.95, len(deltas) - 1, loc=sum(deltas) / len(deltas), scale=stats.sem(deltas))
        assert float(row["p"]) == pytest.approx(test.pvalue, rel=1e-3)
        assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx((low, high), rel=1e-4)
        for held_row in (r for r in _rows(out / "heldout.csv") if r["arm"] == row["arm"]):  # each from its run
            (run,) = [r for r in runs if f"{r['sweep']}/{r['run']}" == held_row["run"]]
            assert run["val/loss"] == held_row["val/loss"] and run["optim.lr"] == held_row["optim.lr"]


def _moe_sweeps(root: Path, widths=(16, 32)) -> list[Path]:
    """Two sweeps side by side, as a dense-against-mixture study runs them: a wide dense arm in
    one, dense and two mixtures in the other; data, depth and schedule held fixed."""
    fixed = {"data.source": "kjv", "data.seq_len": 64, "model.n_layers": 2, "model.d_ff": None}
    arms = {
        "wide": [{"model.ffn": "dense", "model.ff_mult": 8, "model.moe_top_k": 2, "task.moe_balance": 0.01}],
        "mixed": [
            {"model.ffn": ffn, "model.ff_mult": None, "model.moe_top_k": k, "task.moe_balance": balance}
            for ffn, k, balance in (("dense", 2, 0.01), ("moe", 1, 0.01), ("moe", 1, 0.0))
        ],
    }
    sweeps = []
    for name, settings in arms.items():
        runs = []
        for arm in settings:
            for width in widths:
                for lr in RATES[:2]:
                    for seed in (0, 1, 2):
                        config = {**fixed, **arm, "model.d_model": width, "optim.lr": lr, "seed": seed}
                        loss = 3.0 - 0.2 * math.log2(width / 16) + 0.05 * (arm["model.ffn"] == "moe")
                        noise = 0.011 * ((seed * 5 + int(lr * 1e4)) % 3) + 0.004 * ((seed * len(runs)) % 5)
                        runs.append((config, loss + 20 * lr + noise - 0.01 * (arm["model.ff_mult"] or 0)))
        sweep = write_sweep(
            root / f"sw_{name}",
            runs,
            flops=lambda c: 100 * c["model.d_model"] ** 2,
            params=lambda c: 12 * c["model.d_model"] ** 2,
        )
        for record in sweep.glob("*/summary.json"):  # as zoo-train logs it: the last step's, beside the run's
            summary = json.loads(record.read_text())
            summary["metrics"]["tokens_per_s"] = summary["tokens_per_s"] - 50 * len(record.parent.name)
            record.write_text(json.dumps(summary))
        sweeps.append(sweep)
    return sweeps


@pytest.mark.parametrize("named", ["sweeps", "run directories"])
@pytest.mark.parametrize("scaled", [False, True], ids=["tuned", "scaled"])
def test_a_report_rebuilt_from_its_runs_csv_is_the_report_the_runs_gave(tmp_path, named, scaled):
    """The same arms, named alike (a dense arm beside mixtures by the keys it reads), the same
    settings held fixed and the same runs, each named by its sweep, whether the sweeps or their
    run directories one by one were compared."""
    from zoo.compare.recompute import rebuild
    from zoo.compare.scale import compare_scaled
    from zoo.compare.tune import compare_tuned

    sweeps = _moe_sweeps(tmp_path, widths=(16, 32) if scaled else (16,))
    dirs = (
        sweeps if named == "sweeps" else [run for s in sweeps for run in sorted(s.iterdir(), key=lambda p: int(p.name))]
    )
    built, rebuilt = tmp_path / "built", tmp_path / "rebuilt"
    if scaled:
        compare_scaled(dirs, built, key="model.d_model", tune="optim.lr", plots=False)
    else:
        compare_tuned(dirs, built, key="optim.lr", plots=False)
    rebuild(built, rebuilt)
    for name in ("report.md", "report.csv", "heldout.csv", "runs.csv", "comparison.json"):
        assert (rebuilt / name).read_text() == (built / name).read_text(), name
    md = (built / "report.md").read_text()
    assert "arm 1 (model.ff_mult=(unset), model.ffn=dense)" in md and "compare.arm" not in md
    held = next(line for line in md.splitlines() if line.startswith("Held fixed:"))
    assert held.startswith("Held fixed: `data.source=kjv`, `data.seq_len=64`, ") and "`model.n_layers=2`" in held
    assert "Runs from `sw_wide`, `sw_mixed`." in md
    assert {(r["sweep"], r["run"]) for r in _rows(built / "runs.csv")} == {
        (s.name, p.name) for s in sweeps for p in s.iterdir()
    }
    assert all(r["run"].startswith("sw_") for r in _rows(built / "heldout.csv"))


def test_a_scaled_report_rebuilt_from_its_runs_csv_names_the_keys_that_change_with_its_size(tmp_path):
    """Depth growing with width is part of a size: the report built from the run directories
    says so, and comparison.json keeps those keys (`linked`), so the one rebuilt from runs.csv,
    which holds no depth, says so too."""
    from zoo.compare.recompute import rebuild
    from zoo.compare.scale import compare_scaled

    runs = []
    for norm in ("pre", "post"):
        for width, layers in ((16, 2), (32, 3), (64, 4)):
            for seed in (0, 1, 2):
                config = {"model.norm": norm, "model.d_model": width, "model.n_layers": layers, "optim.lr": 3e-3}
                config["seed"] = seed
                runs.append((config, _loss(config)))
    sweep = write_sweep(tmp_path / "sweep", runs, flops=lambda c: 100 * c["model.d_model"] ** 2)
    built, rebuilt = tmp_path / "built", tmp_path / "rebuilt"
    compare_scaled([sweep], built, key="model.d_model", plots=False)
    rebuild(built, rebuilt)
    for name in ("report.md", "report.csv", "runs.csv", "comparison.json"):
        assert (rebuilt / name).read_text() == (built / name).read_text(), name
    assert "(with `model.n_layers`, which change with it)" in (built / "report.md").read_text()
    assert json.loads((built / "comparison.json").read_text())["linked"] == ["model.n_layers"]
    assert "model.n_layers" not in _rows(built / "runs.csv")[0]


COMMITTED = sorted(p.parent for p in REPORTS.rglob("runs.csv"))
IMAGE = re.compile(r"\n\n!\[[^\]\n]*\]\([^)\n]*\)")  # a plot's line: a rebuild without plots draws none


@pytest.mark.parametrize("study", COMMITTED, ids=[str(p.relative_to(REPORTS)) for p in COMMITTED])
def test_each_committed_report_with_a_runs_csv_is_the_one_its_tables_rebuild(tmp_path, study):
    """Its tables hold the settings held fixed and each run's sweep (reports/rebuild.py restored
    them in the first ones from their report.md): the rebuild is the committed report, file for
    file, its plots' lines aside, and `zoo-compare recompute=` finds every value of it equal."""
    from zoo.compare.recompute import compare_rebuilt, rebuild

    spec = rebuild(study, tmp_path, plots=False)
    lines, equal = compare_rebuilt(study, tmp_path, spec)
    assert equal, "\n".join(lines)
    tables = ("report.csv", "heldout.csv", "pairs.csv", "decisions.csv", "extrapolation.csv", "runs.csv")
    tables += ("lengths.csv",)
    for name in ("report.md", *tables, "comparison.json"):
        assert (tmp_path / name).is_file() == (study / name).is_file(), name
        if (study / name).is_file():
            given = (study / name).read_text(encoding="utf-8")
            again = (tmp_path / name).read_text(encoding="utf-8")
            assert again == (IMAGE.sub("", given) if name == "report.md" else given), name
    assert all(r["run"] != "." for r in _rows(study / "runs.csv"))


PLAIN = REPORTS / "glu_scaling" / "at_24"  # a committed plain report with runs.csv
TUNED = REPORTS / "wortsman_instability"  # a committed tuned one


def _copy(report: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(report, tmp_path / report.name))


def _edit_csv(path: Path, edit) -> None:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    rows = edit(rows)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def _edit_spec(directory: Path, edit) -> None:
    spec = json.loads((directory / "comparison.json").read_text())
    edit(spec)
    (directory / "comparison.json").write_text(json.dumps(spec, indent=2) + "\n")


def assert_one_line(result, *fragments: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert all(f in lines[0] for f in fragments), lines[0]
    return lines[0]


def test_interval_columns_deleted_with_report_md_edited_to_match_are_caught(tmp_path, cli_here):
    report = _copy(PLAIN, tmp_path)
    gone = ("ci_low", "ci_high", "adj_low", "adj_high")

    def drop(rows):
        keep = [i for i, name in enumerate(rows[0]) if name not in gone]
        return [[row[i] for i in keep] for row in rows]

    _edit_csv(report / "report.csv", drop)
    md = (report / "report.md").read_text()
    edited = re.sub(r" \[[-+]\d\.\d+, [-+]\d\.\d+\]", "", md)
    assert edited != md
    (report / "report.md").write_text(edited)
    result = cli_here("compare", f"recompute={report}")
    assert result.returncode == 1, result.stderr[-2000:]
    for column in gone:
        assert f"report.csv: column {column} is not in the report: DIFFERS" in result.stdout
    assert re.search(r"^report\.md line \d+: report .*, rebuilt .*: DIFFERS$", result.stdout, re.M)
    assert "every value equals the report" not in result.stdout


def test_a_number_changed_in_report_md_alone_is_caught(tmp_path, cli_here):
    report = _copy(PLAIN, tmp_path)
    result = cli_here("compare", f"recompute={report}")
    assert result.returncode == 0 and "report.md: every line equals the rebuilt one: equal" in result.stdout
    md = (report / "report.md").read_text()
    mean = re.search(r"\| (\d\.\d{4}) ± ", md)
    assert mean is not None
    (report / "report.md").write_text(md.replace(mean.group(0), "| 9.9999 ± ", 1))
    result = cli_here("compare", f"recompute={report}")
    assert result.returncode == 1
    (line,) = [line for line in result.stdout.splitlines() if "DIFFERS" in line]
    assert line.startswith("report.md line ") and "9.9999" in line and mean.group(1) in line
    assert "1 value(s) differ from the report" in result.stdout


@pytest.mark.parametrize(
    "edit, fragments",
    [
        (lambda s: s.update(kind="plain"), ["comparison.json: kind is 'plain' but it names tune=optim.lr"]),
        (lambda s: s.update(kind="scaled"), ["comparison.json: kind is 'scaled' but it names no scale= key"]),
        (lambda s: s.update(kind="ranked"), ["comparison.json: kind is 'ranked', not one of plain, tuned, scaled"]),
        (lambda s: s.update(fixed=[1, 2]), ["comparison.json: fixed is [1, 2], not an object or null"]),
        (lambda s: s.update(metric=5), ["comparison.json: metric is 5, not text"]),
        (lambda s: s.update(pairs="yes"), ['comparison.json: pairs is "yes", not true or false or null']),
        (lambda s: s.pop("settings"), ["comparison.json: settings is missing, not a list"]),
        (lambda s: s.update(metric="val/nope"), ["comparison.json: metric val/nope is not one of its metrics"]),
        (lambda s: s.update(baseline="arm 99"), ["comparison.json: baseline is 'arm 99', an arm no run of runs.csv"]),
    ],
)
def test_a_comparison_json_of_another_kind_or_type_is_one_line(tmp_path, cli_here, edit, fragments):
    report = _copy(TUNED, tmp_path)
    _edit_spec(report, edit)
    assert_one_line(cli_here("compare", f"recompute={report}"), str(report / "comparison.json"), *fragments)


def test_a_kind_changed_with_its_keys_rebuilds_another_report_and_is_caught(tmp_path, cli_here):
    """A tuned report called plain (its tune= key removed too) is a well-formed comparison.json:
    rebuilt as plain, its report.csv and report.md differ from the report's."""
    report = _copy(TUNED, tmp_path)
    _edit_spec(report, lambda s: s.update(kind="plain", tune=None))
    result = cli_here("compare", f"recompute={report}")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "report.md line 1: report " in result.stdout and "value(s) differ from the report" in result.stdout


def _set_cell(column: str, value: str, row: int = 1):
    def edit(rows):
        rows[row][rows[0].index(column)] = value
        return rows

    return edit


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (_set_cell("val/loss", "nan"), "runs.csv, line 2, column val/loss: nan is not a finite figure of a run"),
        (_set_cell("val/loss", "inf", 3), "runs.csv, line 4, column val/loss: inf is not a finite figure of a run"),
        (_set_cell("val/ppl", "1e308"), "runs.csv, line 2, column val/ppl: 1e308 is not a finite figure of a run"),
        (_set_cell("val/loss", "-2.5"), "runs.csv, line 2, column val/loss: -2.5 is negative"),
        (_set_cell("N", "many"), "runs.csv, line 2, column N: 'many' is not a number"),
        (_set_cell("D", "-5"), "runs.csv, line 2, column D: -5 is negative"),
        (_set_cell("optim.lr", "1e308"), "runs.csv, line 2, column optim.lr: 1e308 is not a finite setting"),
        (_set_cell("status", "done"), "runs.csv, line 2, column status: 'done' is not one of finished, failed"),
        (_set_cell("sweep", ""), "runs.csv, line 2, column sweep: empty"),
        (lambda rows: [[c for c, n in zip(r, rows[0]) if n != "D"] for r in rows], "runs.csv, line 1: no column 'D'"),
        (lambda rows: [*rows, ["a", "b"]], "runs.csv, line 14: 2 cells, its header has"),
    ],
)
def test_a_damaged_runs_csv_is_one_line_naming_the_line_and_column(tmp_path, cli_here, edit, fragment):
    """A NaN, infinite or absurd figure (rebuild took a NaN loss as a finished run: "nan ± nan
    (n=2)"), text where a number belongs, a missing column: one line, exit 2, nothing rebuilt."""
    report = _copy(PLAIN, tmp_path)
    _edit_csv(report / "runs.csv", edit)
    assert_one_line(
        cli_here("compare", f"recompute={report}"), f"{report / fragment}", "run zoo-compare on its sweeps again"
    )


def test_rebuild_refuses_a_nan_figure_instead_of_averaging_it(tmp_path):
    from zoo.compare.recompute import rebuild
    from zoo.config.records.reader import DamagedRecord

    report = _copy(PLAIN, tmp_path)
    _edit_csv(report / "runs.csv", _set_cell("val/loss", "nan", 2))
    with pytest.raises(DamagedRecord, match="line 3, column val/loss: nan is not a finite figure"):
        rebuild(report, tmp_path / "out")
    assert not (tmp_path / "out" / "report.md").exists()


@pytest.mark.parametrize("name", ["runs.csv", "comparison.json", "report.csv", "report.md"])
def test_a_table_that_is_not_utf8_or_not_a_regular_file_is_one_line(tmp_path, cli_here, name):
    import os

    report = _copy(PLAIN, tmp_path)
    lines = (report / name).read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if i and len(line) > 3)
    lines[at] = lines[at][:3] + b"\xff" + lines[at][3:]
    (report / name).write_bytes(b"\n".join(lines))
    assert_one_line(
        cli_here("compare", f"recompute={report}"),
        f"{report / name}, line {at + 1}, column 4: byte 0xff is not UTF-8 text",
    )
    (report / name).unlink()
    os.mkfifo(report / name)  # a read would wait for a writer forever
    assert_one_line(cli_here("compare", f"recompute={report}"), f"{report / name} is not a regular file")
