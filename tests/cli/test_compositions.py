"""How many times one zoo-train command composes its config, counted through Hydra's config
loader (tests/cli/count_compositions.py): a single run and each arm of a sweep are composed a
fixed number of times, so a change that composes again (a second check, a reference) shows here.
docs/extending.md says which compositions there are and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl

from tests.cli.conftest import tiny_overrides
from zoo.cli.gate import check_command_line
from zoo.cli.hydra_args import parse_hydra_args
from zoo.cli.train import main
from zoo.config.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

# one: zoo's own composition before anything is written (the checks, the claim) is the one Hydra
# runs as the job, records in .hydra/ and trains (zoo.cli.hydra_job.run_claimed)
SINGLE_RUN = 1
# zoo's composition of each arm; Hydra's reading of the mode and its composition of the sweep;
# per arm, the basic sweeper's check of its overrides and the job
TWO_ARM_SWEEP = 2 + 2 + 2 * 2


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """Every composition this process makes from here on, through Hydra's config loader (as
    tests/cli/count_compositions.py counts a whole command in a process of its own)."""
    calls: list[str] = []
    original = ConfigLoaderImpl.load_configuration

    def counting(self, config_name, overrides, run_mode, *args, **kwargs):
        calls.append(f"{config_name} {run_mode.name} {' '.join(overrides)}")
        return original(self, config_name, overrides, run_mode, *args, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counting)
    return calls


@pytest.mark.parametrize(
    ("argv", "compositions"),
    [
        (["-cn", "quick", "trainer.max_steps=1"], 1),  # a single run: its own composition
        (["-cn", "quick", "-m", "model/position=rope,alibi"], 2),  # one per arm
        # one per value of each swept key, not per arm: 2 + 1 for the 4 arms of 2 x 2 values
        (["-cn", "quick", "-m", "model/position=rope,alibi", "seed=0,1"], 3),
    ],
    ids=["run", "2 arms", "2x2 arms"],
)
def test_zoo_checks_a_command_by_one_composition_per_value(counted, argv, compositions):
    """zoo's share of a command's compositions, before Hydra starts (zoo.cli.gate): the checks
    compose each value of a sweep once, and the search for a valid arm reuses them."""
    assert check_command_line(parse_hydra_args(argv)) is not None
    assert len(counted) == compositions, "\n".join(counted)


def test_an_all_invalid_sweep_is_refused_on_the_compositions_of_its_values(counted):
    """Each arm of `model.n_heads=3,5` with `model.d_model=100` breaks the same rule: the refusal
    up front takes the two compositions the checks made, none more."""
    argv = ["-cn", "quick", "-m", "model.d_model=100", "model.n_heads=3,6"]
    with pytest.raises(ConfigError, match="no arm of the sweep is a valid run"):
        check_command_line(parse_hydra_args(argv))
    assert len(counted) == 2, "\n".join(counted)


def test_printing_the_config_composes_it_twice(counted, capsys):
    """`--cfg job` runs nothing: zoo's check, then Hydra's composition of what it prints (no
    reading of the mode, no job)."""
    main(["-cn", "quick", "model.d_model=32", "--cfg", "job"])
    assert "d_model: 32" in capsys.readouterr().out
    assert len(counted) == 2, "\n".join(counted)


def _compositions(tmp_path: Path, *args: str) -> list[str]:
    counted = tmp_path / "compositions.txt"
    result = subprocess.run(
        [sys.executable, "-m", "tests.cli.count_compositions", str(counted), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return counted.read_text().splitlines()


def _tiny(run_dir=None) -> list[str]:
    kept = ("trainer.max_steps", "scheduler.warmup_steps", "trainer.val_check_interval")
    return [o for o in tiny_overrides(run_dir) if not o.startswith(kept)] + [
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
    ]


@pytest.mark.slow
def test_a_single_run_is_composed_a_fixed_number_of_times(tmp_path):
    calls = _compositions(tmp_path, "-cn", "quick", *_tiny(tmp_path / "run"))
    assert (tmp_path / "run" / "summary.json").is_file()
    assert len(calls) == SINGLE_RUN, "\n".join(calls)


@pytest.mark.slow
def test_each_arm_of_a_sweep_is_composed_a_fixed_number_of_times(tmp_path):
    sweep = tmp_path / "sweep"
    calls = _compositions(
        tmp_path, "-cn", "quick", "-m", "model/position=rope,alibi", *_tiny(), f"hydra.sweep.dir={sweep}"
    )
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1"]
    assert all((sweep / arm / "summary.json").is_file() for arm in ("0", "1"))
    assert len(calls) == TWO_ARM_SWEEP, "\n".join(calls)
