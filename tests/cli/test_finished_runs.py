"""A finished run stays finished: the same command again (or ckpt_path=last) reports the run's
figures and changes none of its files; a longer run continues it; a sweep rerun trains only its
unfinished arms; a run resumed at its last step validates it rather than writing empty
metrics; zoo-compare never counts a summary without metrics as a finished run."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train


def _files(run_dir):
    """Every file of the run but its log (path -> bytes)."""
    return {
        p.relative_to(run_dir).as_posix(): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.name != "train.log"
    }


@pytest.mark.slow
def test_the_same_command_again_changes_nothing_and_reports_the_run(tmp_path, zoo_train_here):
    run = tmp_path / "run"
    first = zoo_train_here(*tiny_overrides(run))
    assert first.returncode == 0, first.stderr[-2000:]
    before = _files(run)
    summary = json.loads((run / "summary.json").read_text())
    # a seed is no part of what a finished run is held to; its record (.hydra/) keeps the first command's
    for extra in ([], ["ckpt_path=last"], ["seed=7"]):
        again = zoo_train_here(*tiny_overrides(run), *extra)
        assert again.returncode == 0, again.stderr[-2000:]
        assert "is already finished at step 6; nothing to do" in again.stderr + again.stdout
        assert f"val/loss {summary['metrics']['val/loss']:.4g}" in again.stdout
        assert _files(run) == before
    longer = zoo_train_here(*tiny_overrides(run), "trainer.max_steps=9")
    assert longer.returncode == 0, longer.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["global_step"] == 9


@pytest.mark.slow
def test_a_run_resumed_at_its_last_step_validates_it(tmp_path, zoo_train_here):
    """A run whose summary is lost (killed while writing it, before the atomic writer) resumes
    at its last step: it trains nothing and reports the validation of the weights it ends with."""
    run = tmp_path / "run"
    assert zoo_train_here(*tiny_overrides(run)).returncode == 0
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").unlink()
    again = zoo_train_here(*tiny_overrides(run))
    assert again.returncode == 0, again.stderr[-2000:]
    redone = json.loads((run / "summary.json").read_text())
    assert redone["status"] == "finished" and redone["global_step"] == 6
    assert redone["metrics"]["val/loss"] == pytest.approx(summary["metrics"]["val/loss"], abs=1e-6)


@pytest.mark.slow
def test_a_sweep_rerun_trains_only_its_unfinished_arms(tmp_path, cli_here):
    sweep = tmp_path / "sweep"
    args = [o for o in tiny_overrides() if not o.startswith("trainer.max_steps")]
    command = ["-m", *args, "trainer.max_steps=6", "seed=0,1", f"hydra.sweep.dir={sweep}"]
    first = zoo_train(*command)  # a process of its own, forked (tests/forked.py)
    assert first.returncode == 0, first.stderr[-2000:]
    kept = _files(sweep / "0")
    (sweep / "1" / "summary.json").unlink()  # arm 1 lost its record; arm 0 is finished
    (sweep / "1" / "checkpoints" / "last.ckpt").unlink()
    for ckpt in (sweep / "1" / "checkpoints").glob("*.ckpt"):
        ckpt.unlink()
    again = zoo_train(*command)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _files(sweep / "0") == kept
    assert json.loads((sweep / "1" / "summary.json").read_text())["status"] == "finished"
    report = cli_here("compare", str(sweep))
    assert report.returncode == 0, report.stderr[-2000:]
    assert "2 finished" in (sweep / "compare" / "report.md").read_text()


@pytest.mark.slow
def test_compare_counts_no_summary_without_metrics_as_finished(tmp_path, zoo_train_here, cli_here):
    sweep = tmp_path / "sweep"
    for name in ("a", "b"):
        assert zoo_train_here(*tiny_overrides(sweep / name), f"seed={'ab'.index(name)}").returncode == 0
    summary = json.loads((sweep / "b" / "summary.json").read_text())
    summary["metrics"] = {}
    (sweep / "b" / "summary.json").write_text(json.dumps(summary))
    report = cli_here("compare", str(sweep))
    assert report.returncode == 0, report.stderr[-2000:]
    (line,) = [ln for ln in report.stderr.splitlines() if "holds no metrics" in ln]
    assert str(sweep / "b" / "summary.json") in line
    assert "1 finished, 1 damaged" in (sweep / "compare" / "report.md").read_text()


@pytest.mark.slow
def test_a_finished_quick_run_says_every_key_to_change_to_train_on(tmp_path, zoo_train_here):
    """-cn quick's warmup follows trainer.max_steps: the same command again names both the longer
    run and the warmup to keep, and the command it suggests continues the run at once."""
    run = tmp_path / "run"
    tiny = [
        o
        for o in tiny_overrides(run)
        if not o.startswith(("trainer.max_steps", "scheduler.warmup_steps", "trainer.val_check_interval"))
    ]
    command = ["-cn", "quick", *tiny, "trainer.max_steps=10"]
    assert zoo_train_here(*command).returncode == 0
    again = zoo_train_here(*command)
    assert again.returncode == 0, again.stderr[-2000:]
    (line,) = [ln for ln in (again.stderr + again.stdout).splitlines() if "is already finished" in ln]
    assert "e.g. trainer.max_steps=20 scheduler.warmup_steps=1" in line, line
    suggested = line.split("e.g. ", 1)[1].rstrip(")").split()
    longer = zoo_train_here(*command, *suggested)
    assert longer.returncode == 0, longer.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["global_step"] == 20
