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


STUDIES = sorted(p.parent for p in REPORTS.rglob("report.csv"))


@pytest.mark.parametrize("study", STUDIES, ids=[str(p.relative_to(REPORTS)) for p in STUDIES])
def test_each_committed_study_is_rebuilt_or_said_to_need_a_rerun(study):
    """A study with runs.csv must rebuild equal; one written before runs.csv existed holds each
    arm's mean and spread only, so no interval of it can be rebuilt: recompute says so."""
    from zoo.compare.errors import CompareError

    if (study / "runs.csv").is_file():
        lines, equal = recompute(study)
        assert equal, "\n".join(lines)
    else:
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
    file, its plots' lines aside."""
    from zoo.compare.recompute import rebuild

    rebuild(study, tmp_path, plots=False)
    for name in ("report.md", "report.csv", "heldout.csv", "pairs.csv", "runs.csv", "comparison.json"):
        assert (tmp_path / name).is_file() == (study / name).is_file(), name
        if (study / name).is_file():
            given = (study / name).read_text(encoding="utf-8")
            again = (tmp_path / name).read_text(encoding="utf-8")
            assert again == (IMAGE.sub("", given) if name == "report.md" else given), name
    assert all(r["run"] != "." for r in _rows(study / "runs.csv"))
