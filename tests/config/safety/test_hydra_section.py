"""Hydra's own section is closed (zoo.config.safety.hydra_section): every key of Hydra's schema is either
a setting whose value is checked, or refused; each escape found by the red team is replayed
against a file outside the run that must come through untouched."""

from __future__ import annotations

import sys

import pytest
from omegaconf import DictConfig, OmegaConf

from zoo.cli.compose import compose
from zoo.config.errors import ConfigError
from zoo.config.safety.hydra_section import HYDRA_KEYS, Rule, leaves, rule_of

OPTUNA = ["hydra/sweeper=optuna"]  # a listed plugin's sweeper: its keys have rules too


def _composed_leaves(overrides: list[str]) -> dict[str, object]:
    hydra = OmegaConf.to_container(compose(overrides, return_hydra_config=True, check=False).hydra, resolve=False)
    return {k: v for k, v in leaves(hydra).items() if not k.startswith(("hydra.runtime.", "hydra.overrides."))}


def _schema_leaves() -> dict[str, object]:
    """Every key Hydra's schema (HydraConf) defines, with the keys zoo's own composition adds
    under it (the logging sections, the launchers zoo ships, hydra.env): what a Hydra upgrade
    would change."""
    from hydra.conf import HydraConf

    out: dict[str, object] = {}

    def walk(node, path):
        for key in node.keys():
            sub = node._get_node(key)
            if isinstance(sub, DictConfig) and len(sub) > 0:
                walk(sub, f"{path}.{key}")
            else:
                out[f"{path}.{key}"] = None

    walk(OmegaConf.structured(HydraConf), "hydra")
    for launcher in ([], ["hydra/launcher=slurm"], ["hydra/launcher=submitit_local"]):
        out.update(_composed_leaves(launcher))
    return out


SCHEMA = _schema_leaves()
OPTUNA_KEYS = {k: v for k, v in _composed_leaves(OPTUNA).items() if k not in SCHEMA}
SCHEMA.update(OPTUNA_KEYS)


def test_every_key_of_hydras_schema_has_a_rule():
    """A key no rule names would be refused at run time anyway; naming each one here means a
    Hydra upgrade that adds a key fails this test until someone decides what it may hold."""
    unruled = sorted(path for path in SCHEMA if rule_of(path) is None)
    assert unruled == []


def test_every_setting_is_checked_or_checked_elsewhere():
    elsewhere = {"hydra.sweeper.params", "hydra.job.env_set", "hydra.job.env_set.*"}  # variants; targets.py
    unchecked = [p for p, (rule, check) in HYDRA_KEYS.items() if rule is Rule.SETTING and check is None]
    assert set(unchecked) <= elsewhere


def _override_for(path: str, value) -> str:
    """An override that changes `path` from zoo's value to another of the same kind."""
    if isinstance(value, bool):
        new = str(not value).lower()
    elif isinstance(value, int):
        new = str(value + 7)
    elif isinstance(value, list) or path.endswith(("searchpath", "exclude_keys", "env_copy", "root.handlers")):
        new = "[zz]"
    elif value == {}:
        return f"++{path}.zz=1"
    else:
        new = "zz"
    return f"++{path}={new}"


NOT_SETTINGS = sorted(
    p
    for p in SCHEMA
    if rule_of(p) is not None and rule_of(p)[0] is not Rule.SETTING and not p.startswith("hydra.defaults")
)


@pytest.mark.parametrize("path", NOT_SETTINGS)
def test_a_key_that_is_not_a_setting_is_refused(path):
    launcher = ["hydra/launcher=slurm"] if path.startswith("hydra.launcher.") else []
    sweeper = OPTUNA if path in OPTUNA_KEYS else []
    override = _override_for(path, SCHEMA[path])
    with pytest.raises(ConfigError, match="refused"):
        compose([*launcher, *sweeper, override], return_hydra_config=True, check=False)


@pytest.mark.parametrize(
    "overrides",
    [
        ["hydra.run.dir=elsewhere/run", "hydra.sweep.dir=elsewhere/sweep", "hydra.sweep.subdir=arm_${hydra.job.num}"],
        ["hydra.mode=MULTIRUN", "hydra.verbose=true", "hydra.job_logging.root.level=DEBUG"],
        [
            "hydra/launcher=slurm",
            "hydra.launcher.partition=gpu",
            "hydra.launcher.timeout_min=1440",
            "hydra.launcher.cpus_per_task=8",
            "hydra.launcher.account=lab",
            "hydra.launcher.submitit_folder=${hydra.sweep.dir}/.jobs/%j",
        ],
        ["hydra.searchpath=[file:///somewhere/configs]", "+hydra.job.env_set.OMP_NUM_THREADS=4"],
        [*OPTUNA, "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=3", "hydra.sweeper.n_trials=4"],
        [*OPTUNA, "hydra.sweeper.n_jobs=1", "hydra.sweeper.study_name=lr", "hydra.sweeper.sampler.n_startup_trials=2"],
        # what Lightning's launcher adds for the ranks it starts
        ['hydra.run.dir="runs/x"', "hydra.job.name=train_ddp_process_1", "hydra.output_subdir=null"],
    ],
)
def test_the_settings_users_need_pass(overrides):
    cfg = compose(overrides, return_hydra_config=True, check=False)
    assert cfg.hydra.overrides.hydra == overrides


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["hydra.sweep.subdir=../beside"], "inside the sweep directory"),
        (["hydra.sweep.subdir=/abs"], "inside the sweep directory"),
        (["hydra.sweep.subdir=${hydra.job.override_dirname}", "data.path=../../x"], "inside the sweep directory"),
        (["hydra/launcher=slurm", "hydra.launcher.submitit_folder=/tmp/jobs"], "lie in the sweep directory"),
        (["hydra/launcher=slurm", "hydra.launcher.submitit_folder=${hydra.sweep.dir}/../x"], "inside the sweep"),
        (["hydra/launcher=slurm", "hydra.launcher.partition='gpu\nrm -rf x'"], "one line"),
        (["hydra/launcher=slurm", "hydra.launcher.setup=[echo]"], "shell lines"),
        (["hydra/launcher=slurm", "hydra.launcher.timeout_min=-1"], "whole number"),
        (["hydra/launcher=slurm", "+hydra.launcher.additional_parameters.output=/tmp/x"], "sbatch parameters"),
        (["hydra.mode=SOMETIMES"], "expected one of [RUN, MULTIRUN]"),  # Hydra's own check
        (["hydra.job_logging.root.level=LOUD"], "a log level"),
        (["hydra.searchpath=[pkg://json]"], "pkg:// imports"),
        (["hydra/job_logging=disabled"], "zoo runs with hydra/job_logging default"),
        (["hydra/sweeper=nevergrad"], "zoo runs with hydra/sweeper basic"),  # a plugin zoo does not list
        (["hydra/launcher=joblib"], "a listed plugin ships it"),
        ([*OPTUNA, "hydra/sweeper/sampler=qmc"], "zoo runs with hydra/sweeper/sampler tpe"),
        ([*OPTUNA, "hydra.sweeper.storage=sqlite:////tmp/x.db"], "a storage URL"),
        ([*OPTUNA, "hydra.sweeper.custom_search_space=os.system"], "zoo's own setting"),
        ([*OPTUNA, "hydra.sweeper.sampler._target_=os.system"], "zoo's own setting"),
        ([*OPTUNA, "hydra.sweeper.direction=maximize"], "zoo's own setting"),  # the objective is val/loss
        ([*OPTUNA, "hydra.sweeper.sampler.seed=-1"], "whole number"),
        ([*OPTUNA, "hydra.sweeper.n_trials=0"], "at least 1"),  # a search of no trial
        ([*OPTUNA, "hydra.sweeper.n_jobs=0"], "at least 1"),
        (["hydra.job.num=3"], "Hydra fills it in"),
        (["hydra.job.name=.."], "one word"),
        (["hydra.output_subdir=../../elsewhere"], "go to the run's .hydra/"),
    ],
)
def test_a_setting_with_a_bad_value_is_one_line(overrides, words):
    with pytest.raises(ConfigError) as caught:
        compose(overrides, return_hydra_config=True, check=False)
    message = str(caught.value)
    assert words in message and "\n" not in message.replace("gpu\nrm", ""), message


# -- the red team's escapes, each against a file outside the run ------------------------------


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "outside" / "precious.txt"
    path.parent.mkdir()
    path.write_text("keep me")
    return path


def _refused(cli_here, tmp_path, *args):
    run = tmp_path / "run"
    result = cli_here("train", *args, f"hydra.run.dir={run}", "trainer.max_steps=2")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not run.exists()  # refused before anything was written
    return lines[0]


def test_a_hydra_callback_cannot_truncate_a_file(cli_here, tmp_path, victim):
    line = _refused(
        cli_here,
        tmp_path,
        "+hydra.callbacks.x._target_=logging.FileHandler",
        f"+hydra.callbacks.x.filename={victim}",
        "+hydra.callbacks.x.mode=w",
    )
    assert "hydra.callbacks.x" in line and victim.read_text() == "keep me"


def test_a_hydra_callback_in_a_config_directory_cannot_truncate_a_file(cli_here, tmp_path, victim):
    (tmp_path / "cd").mkdir()
    (tmp_path / "cd" / "evil.yaml").write_text(
        "defaults:\n  - config\n  - _self_\nhydra:\n  callbacks:\n    x:\n      _target_: logging.FileHandler\n"
        f"      filename: {victim}\n      mode: w\n"
    )
    _refused(cli_here, tmp_path, "-cd", str(tmp_path / "cd"), "-cn", "evil")
    assert victim.read_text() == "keep me"


def test_hydras_files_cannot_be_written_elsewhere(cli_here, tmp_path, victim):
    (victim.parent / "config.yaml").write_text("someone's config")
    line = _refused(cli_here, tmp_path, f"hydra.output_subdir={victim.parent}")
    assert "hydra.output_subdir" in line
    assert (victim.parent / "config.yaml").read_text() == "someone's config"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["config.yaml", "precious.txt"]


def test_a_job_name_cannot_climb_out_of_the_run_directory(cli_here, tmp_path):
    line = _refused(
        cli_here,
        tmp_path,
        "hydra.job.name=..",
        "hydra.job_logging.handlers.file.filename=${hydra.runtime.output_dir}/${hydra.job.name}/x",
    )
    assert "hydra.job" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_search_path_cannot_import_a_package(cli_here, tmp_path, monkeypatch):
    marker = tmp_path / "IMPORTED"
    (tmp_path / "pkgs" / "zoo_test_payload").mkdir(parents=True)
    (tmp_path / "pkgs" / "zoo_test_payload" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    line = _refused(cli_here, tmp_path, "hydra.searchpath=[pkg://zoo_test_payload]")
    assert "pkg://zoo_test_payload" in line
    assert not marker.exists() and "zoo_test_payload" not in sys.modules


@pytest.mark.parametrize("entry", ["../outside/x@_here_", "/../../../../{outside}/x"])
def test_a_defaults_entry_cannot_reach_outside_its_directory(cli_here, tmp_path, entry):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.yaml").write_text("model:\n  d_model: 48\n")
    (tmp_path / "cd").mkdir()
    (tmp_path / "cd" / "evil.yaml").write_text(
        f"defaults:\n  - config\n  - {entry.format(outside=str(outside).lstrip('/'))}\n  - _self_\n"
    )
    line = _refused(cli_here, tmp_path, "-cd", str(tmp_path / "cd"), "-cn", "evil")
    assert "defaults entry" in line


def test_the_environment_is_not_copied_into_hydras_record(cli_here, tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_TEST_SECRET", "s3cr3t")
    line = _refused(cli_here, tmp_path, "+hydra.job.env_copy=[ZOO_TEST_SECRET]")
    assert "s3cr3t" not in line
