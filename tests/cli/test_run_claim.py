"""zoo-train claims a run once, before Hydra writes (`zoo.run.preflight`), and Hydra runs where
the claim says: a directory Hydra resolves differently from the claim, a sweep's arm that its
claim refuses, an explicit directory that looks like the default, and a flag Hydra refuses."""

from __future__ import annotations

import pytest

import zoo
from tests.cli.conftest import tiny_overrides
from zoo.cli.gate import configured_run_dir
from zoo.config.records.rundir import RunDir, RunFailure

TINY = tiny_overrides()


@pytest.mark.slow
def test_a_sweep_whose_arm_its_claim_refuses_fails_with_the_arms_record(cli_here, tmp_path):
    """trainer.max_steps=1 is shorter than the warmup: a refusal of the config that only the
    arm's own claim makes (a sweep's arms are checked for keys, not for their run)."""
    sweep = tmp_path / "sweep"
    result = cli_here("train", "-m", *TINY, "trainer.max_steps=1,4", f"hydra.sweep.dir={sweep}")
    assert result.returncode == 1, result.stderr[-2000:]
    refused = RunFailure.read(sweep / "0")
    assert "warmup" in refused.error and refused.error in result.stderr
    assert RunDir(sweep / "1").summary.is_file()  # the other arm ran
    assert "1 of 2 arm(s) of the sweep" in result.stderr


@pytest.mark.slow
def test_a_directory_that_resolves_anew_each_time_is_hydras(cli_here, tmp_path):
    """${now:%f} (microseconds) names another directory each time it is read: the run is claimed
    again in the one Hydra made, and the directory of the first claim is not left behind."""
    out = tmp_path / "out"
    result = cli_here("train", *TINY, "trainer.max_steps=3", "hydra.run.dir=" + str(out) + "/${now:%f}")
    assert result.returncode == 0, result.stderr[-2000:]
    (run,) = list(out.iterdir())
    assert RunDir(run).summary.is_file() and not RunDir(run).lock.exists()


def test_only_zoos_own_default_directory_is_renamed_or_claimed(monkeypatch):
    monkeypatch.setenv("ZOO_RUN_TIME", "2026-11-27T10:00:00")  # one start time for both compositions
    default = zoo.compose(TINY, return_hydra_config=True)
    assert configured_run_dir(default)[1] is False  # zoo's own default: may become runs/DATE/TIME-N
    same_text = zoo.compose(
        [*TINY, "hydra.run.dir=runs/${zoo.now:%Y-%m-%d}/${zoo.now:%H-%M-%S}"], return_hydra_config=True
    )
    assert configured_run_dir(same_text)[0] == configured_run_dir(default)[0]
    assert configured_run_dir(same_text)[1] is True  # the user's: used as it is, never renamed


@pytest.mark.parametrize("flags", [["--cfg=other"], ["-cn", "quick", "--info", "bogus"]])
def test_a_flag_hydra_refuses_claims_nothing(cli_here, tmp_path, monkeypatch, flags):
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", *flags)
    assert result.returncode == 2 and "invalid choice" in result.stderr, result.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # no runs/ directory


@pytest.mark.parametrize("mode", ["run", "sweep"])
def test_a_directory_naming_a_key_no_config_has_is_one_line(cli_here, tmp_path, monkeypatch, mode):
    """Hydra would fail on it with a traceback after zoo's checks; zoo-train refuses it first."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", *(["-m"] if mode == "sweep" else []), f"hydra.{mode}.dir=out/x${{y}}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == f"zoo-train: error: hydra.{mode}.dir: Interpolation key 'y' not found"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "words, key",
    [
        (["hydra.run.dir=out/x\\${y}"], "hydra.run.dir"),
        (["-m", "hydra.sweep.dir=out/x\\${y}"], "hydra.sweep.dir"),
        (["-m", "hydra.sweep.dir=out/s", "hydra.sweep.subdir=x\\${y}"], "hydra.sweep.subdir"),
    ],
)
def test_a_directory_whose_name_holds_an_escaped_interpolation_is_one_line(cli_here, tmp_path, monkeypatch, words, key):
    """`out/x\\${y}` reads as the name out/x${y}, but Hydra names its log file by interpolating the
    directory again and fails with a traceback after making it; zoo-train refuses it first."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", *words)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    name = "x${y}" if key.endswith("subdir") else "out/x${y}"
    assert result.stderr.strip() == (
        f"zoo-train: error: {key}={name!r} is refused: Hydra reads '${{' in a directory's name as an interpolation"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_new_run_refused_for_its_checkpoint_leaves_no_directory(cli_here, tmp_path, monkeypatch):
    """zoo's default runs/DATE/TIME is made when the run is claimed, before the checkpoint it
    resumes is read: a checkpoint that is not there is one line, and the directory is gone
    again (a run directory named by the user, or a sweep's job, keeps its failed.json)."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", *TINY, f"ckpt_path={tmp_path / 'nope.ckpt'}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert (
        result.stderr.strip()
        == f"zoo-train: error: ckpt_path={tmp_path / 'nope.ckpt'}: {tmp_path / 'nope.ckpt'} does not exist"
    )
    assert list(tmp_path.iterdir()) == []


def _recipe(folder, *lines: str) -> str:
    """A recipe of the user's in `folder` (`-cd folder -cn mine`): a short `quick` run, with
    `lines` of YAML; its sweep's jobs name only their arm's overrides."""
    folder.mkdir()
    text = ["defaults: [quick, _self_]", "trainer:", "  max_steps: 4", "  limit_val_batches: 1", *lines]
    (folder / "mine.yaml").write_text("\n".join(text) + "\n")
    return str(folder)


def _outside(folder, sweep) -> list:
    """What lies in `folder` but not in `sweep`."""
    return sorted(p for p in folder.rglob("*") if sweep not in (p, *p.parents))


@pytest.mark.parametrize(
    "how",
    [
        ["hydra.sweep.subdir=${data.sample_prompt}", "data.sample_prompt=x,../.."],
        ["data.sample_prompt=x,../.."],  # the recipe's own subdir reads the key
    ],
)
def test_a_job_directory_that_resolves_outside_its_sweep_is_one_line(cli_here, tmp_path, monkeypatch, how):
    """hydra.sweep.subdir is checked as Hydra resolves it for the job, after interpolation: a key
    it reads may hold `../..` in one arm. Refused before anything is written."""
    monkeypatch.chdir(tmp_path)
    conf = _recipe(tmp_path / "conf", "hydra:", "  sweep:", "    subdir: ${data.sample_prompt}")
    result = cli_here("train", "-m", "-cd", conf, "-cn", "mine", "hydra.sweep.dir=out/s", *how)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == (
        "zoo-train: error: hydra.sweep.subdir='${data.sample_prompt}' resolves to '../..': a job's directory "
        "must lie inside the sweep directory (hydra.sweep.dir); give hydra.sweep.subdir a relative path "
        "without '..', e.g. hydra.sweep.subdir=${hydra.job.num}"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["conf"]


def test_a_job_directory_known_only_as_the_job_runs_is_checked_where_it_is_made(cli_here, tmp_path, monkeypatch):
    """`${hydra:job.override_dirname}` is known only in Hydra's job, and one arm's is
    `data.sample_prompt=../..`: zoo's resolver refuses it as Hydra makes the job's directory,
    before anything is written there or outside the sweep."""
    conf = _recipe(tmp_path / "conf")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    sweep = work / "out" / "s"
    result = cli_here(
        "train",
        *("-m", "-cd", conf, "-cn", "mine", f"hydra.sweep.dir={sweep}"),
        "hydra.sweep.subdir=${hydra:job.override_dirname}",
        "data.sample_prompt=../..,x",
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "zoo-train: error: hydra.sweep.subdir='data.sample_prompt=../..': a job's directory must lie inside "
        "the sweep directory (hydra.sweep.dir); give hydra.sweep.subdir a relative path without '..', "
        "e.g. hydra.sweep.subdir=${hydra.job.num}"
    )
    assert _outside(work, sweep) == [work / "out"]
    assert not list(sweep.glob("*/.hydra"))  # no job's directory made
