"""A command whose config is not the run it records is refused on one line, before anything is
written: an unknown top-level section (`+foo.bar=1` was recorded and read by nothing), a deleted
one (`~task` recorded `task: ???` and trained the schema's defaults), and Lightning's switches
that train no step or skip validation (`+trainer.fast_dev_run`, `limit_train_batches=0`), which
used to end as "finished"."""

from __future__ import annotations

import pytest

from tests.cli.conftest import tiny_overrides


def _refused(cli_here, tmp_path, *args) -> str:
    run = tmp_path / "run"
    result = cli_here("train", *args, f"hydra.run.dir={run}", "trainer.max_steps=2")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not run.exists()  # nothing written, nothing recorded
    return lines[0]


@pytest.mark.parametrize("override, section", [("+foo.bar=1", "foo"), ("+tesk.kind=causal_lm", "tesk")])
def test_an_unknown_top_level_section_is_refused(cli_here, tmp_path, override, section):
    line = _refused(cli_here, tmp_path, override)
    assert f"{section} is not a section of zoo's config" in line and "model, task, data" in line


def test_a_section_from_a_config_directory_is_refused_too(cli_here, tmp_path):
    (tmp_path / "cd").mkdir()
    (tmp_path / "cd" / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\nextras:\n  note: 1\n")
    line = _refused(cli_here, tmp_path, "-cd", str(tmp_path / "cd"), "-cn", "mine")
    assert "extras" in line and "ZooConfig" in line


@pytest.mark.parametrize("override", ["~task", "~data", "~logger", "~seed"])
def test_deleting_a_top_level_section_is_refused(cli_here, tmp_path, override):
    line = _refused(cli_here, tmp_path, override)
    assert line.startswith(f"zoo-train: error: {override}: the top-level section {override[1:]} cannot be deleted")


def test_a_section_left_unset_is_refused_by_the_validation(tmp_path):
    """zoo.train from Python validates a composed config without the command line: a section
    that is still ??? is named, not filled with the schema's defaults."""
    from omegaconf import OmegaConf, open_dict

    from zoo.cli.compose import compose
    from zoo.config.errors import ConfigError
    from zoo.config.schema.validate import validate

    cfg = compose(["trainer.max_steps=2"])
    with open_dict(cfg):
        cfg.task = "???"
    assert OmegaConf.is_missing(cfg, "task")
    with pytest.raises(ConfigError, match=r"^task is \?\?\? \(the section was deleted"):
        validate(cfg)


@pytest.mark.parametrize(
    "override, says",
    [
        ("+trainer.fast_dev_run=2", "trainer.fast_dev_run=2 is refused"),
        ("+trainer.fast_dev_run=true", "trainer.fast_dev_run=True is refused"),
        ("+trainer.limit_train_batches=0", "trainer.limit_train_batches=0 trains no step"),
        ("trainer.limit_val_batches=0", "trainer.limit_val_batches=0 skips validation"),
    ],
)
def test_a_run_that_would_train_or_validate_nothing_is_refused(cli_here, tmp_path, override, says):
    line = _refused(cli_here, tmp_path, override)
    assert says in line and "finished" in line


def test_a_fraction_of_the_training_batches_that_leaves_none_is_one_line(cli_here, tmp_path):
    """Known only once the data is read: Lightning's refusal becomes one line (it was a
    traceback), recorded in failed.json; no summary says the run finished."""
    run = tmp_path / "run"
    result = cli_here("train", *tiny_overrides(run), "+trainer.limit_train_batches=0.0001")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, lines
    assert "Lightning refuses the trainer settings: You requested to check 0.0001 of the `train_dataloader`" in lines[0]
    assert not (run / "summary.json").exists() and "limit_train_batches" in (run / "failed.json").read_text()
