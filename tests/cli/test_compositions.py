"""How many times one zoo-train command composes its config, counted through Hydra's config
loader (tests/cli/count_compositions.py): a single run and each arm of a sweep are composed a
fixed number of times, so a change that composes again (a second check, a reference) shows here.
docs/extending.md says which compositions there are and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import tiny_overrides

ROOT = Path(__file__).resolve().parents[2]

# zoo's own composition before Hydra starts (the checks: nothing written or instantiated before
# them), Hydra's reading of the mode (`get_mode`) and Hydra's composition of the run, which is
# the config that trains. (The hydra: section of a config from zoo's own files needs no reference
# composition: zoo.cli.hydra_check.)
SINGLE_RUN = 3
# zoo's composition of each arm; Hydra's reading of the mode and its composition of the sweep;
# per arm, the basic sweeper's check of its overrides and the job
TWO_ARM_SWEEP = 2 + 2 + 2 * 2


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
