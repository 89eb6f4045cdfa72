"""zoo-compare follows no link out of a sweep: a `compare/` planted as a link is refused (its
target untouched), and an arm whose files are links out is left out as damaged, named by its
link, its target never read or quoted; `recompute=` reads no table linked out of its report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CONTENT = "TOP-SECRET-CONTENT: {not json"  # what a linked file holds: never read, never shown


def _sweep(root: Path, n: int = 4) -> Path:
    """A sweep of two arms (model.norm) and two seeds as zoo-train leaves it, without training."""
    sweep = root / "sweep"
    for i in range(n):
        norm, seed, loss = ("pre", "post")[i % 2], i // 2, 2.0 + 0.3 * (i % 2) + 0.05 * i
        run = sweep / str(i)
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "overrides.yaml").write_text(f"- model.norm={norm}\n- seed={seed}\n")
        (run / ".hydra" / "config.yaml").write_text(f"model:\n  norm: {norm}\nseed: {seed}\n")
        (run / "summary.json").write_text(json.dumps({"status": "finished", "metrics": {"val/loss": loss}}))
        (run / "metrics.csv").write_text(f"step,tokens_seen,val/loss\n1,100,{loss + 1}\n2,200,{loss}\n")
    return sweep


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_compare_directory_linked_out_of_the_sweep_is_refused_and_its_target_kept(cli_here, tmp_path):
    sweep = _sweep(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "report.md").write_text("someone's report\n")
    (sweep / "compare").symlink_to(elsewhere, target_is_directory=True)
    result = cli_here("compare", str(sweep))
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{sweep / 'compare'} is a link out of {sweep}" in lines[0], result.stderr
    assert _files(elsewhere) == {"report.md": "someone's report\n"}


def test_a_report_file_planted_as_a_link_is_refused_on_one_line(cli_here, tmp_path):
    sweep = _sweep(tmp_path)
    (sweep / "compare").mkdir()
    victim = tmp_path / "victim.md"
    victim.write_text("keep me\n")
    (sweep / "compare" / "report.md").symlink_to(victim)
    result = cli_here("compare", str(sweep))
    assert result.returncode == 2 and "symbolic link" in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1
    assert victim.read_text() == "keep me\n"


def test_an_arm_whose_files_link_out_is_left_out_unread(cli_here, tmp_path):
    sweep = _sweep(tmp_path, n=6)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("summary.json", "config.yaml", "metrics.csv"):
        (outside / name).write_text(CONTENT)
    linked = {4: "summary.json", 5: ".hydra/config.yaml"}
    for i, name in linked.items():
        (sweep / str(i) / name).unlink()
        (sweep / str(i) / name).symlink_to(outside / Path(name).name)
    (sweep / "3" / "metrics.csv").unlink()
    (sweep / "3" / "metrics.csv").symlink_to(outside / "metrics.csv")
    result = cli_here("compare", str(sweep))
    assert result.returncode == 0, result.stderr[-2000:]
    for i, name in {**linked, 3: "metrics.csv"}.items():
        assert f"{sweep / str(i) / name} is a link out of {sweep / str(i)}" in result.stderr, result.stderr
    assert "TOP-SECRET" not in result.stdout + result.stderr
    assert not any("TOP-SECRET" in text for text in _files(sweep / "compare").values())
    assert json.loads(result.stdout)["runs"] == 3  # the three arms' runs that are wholly inside


def test_a_run_reached_through_a_link_out_of_the_named_directory_is_not_read(tmp_path):
    from zoo.compare.runs import RunStatus, read_run

    sweep = _sweep(tmp_path, n=1)
    (tmp_path / "elsewhere").mkdir()
    (sweep / "0" / ".hydra").rename(tmp_path / "elsewhere" / ".hydra")
    (sweep / "0" / ".hydra").symlink_to(tmp_path / "elsewhere" / ".hydra", target_is_directory=True)
    run = read_run(sweep / "0", sweep)
    assert run.status == RunStatus.damaged and run.config == {}
    assert f"{sweep / '0' / '.hydra'} is a link out of" in run.error


REPORT = Path(__file__).resolve().parents[2] / "reports" / "glu_scaling" / "at_24"  # a committed report


def test_recompute_refuses_a_runs_csv_linked_out_of_the_report_without_reading_it(cli_here, tmp_path):
    report = Path(shutil.copytree(REPORT, tmp_path / "report"))
    outside = tmp_path / "outside.csv"
    outside.write_text((report / "runs.csv").read_text().replace("relu", "TOP-SECRET"))
    (report / "runs.csv").unlink()
    (report / "runs.csv").symlink_to(outside)
    result = cli_here("compare", f"recompute={report}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert f"{report / 'runs.csv'} is a link out of {report}" in lines[0]
    assert "TOP-SECRET" not in result.stdout + result.stderr
