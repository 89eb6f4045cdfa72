"""`zoo-train -m hydra/sweeper=optuna`: Hydra's Optuna sweeper with real Optuna. Each trial is an
ordinary run directory; its score is the val/loss zoo-compare reads from its record; a trial that
did not finish is scored as failed; the sampler's seed replays a sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.cli.conftest import tiny_overrides

LR = "tag(log,interval(1e-4,1e-2))"


def _sweep(cli_here, sweep_dir: Path, *args: str, seed: int = 7, trials: int = 2):
    """A sweep of `trials` runs of 3 steps each; a key of `args` replaces the tiny model's (the sweeper would hold a key given twice fixed)."""
    short = {"trainer.max_steps": 3, "trainer.val_check_interval": 3, "scheduler.warmup_steps": 1}
    given = {a.split("=", 1)[0] for a in args} | set(short)
    tiny = [o for o in tiny_overrides() if o.split("=", 1)[0] not in given]
    return cli_here(
        "train",
        "-m",
        "hydra/sweeper=optuna",
        f"hydra.sweeper.n_trials={trials}",
        f"hydra.sweeper.sampler.seed={seed}",
        f"hydra.sweep.dir={sweep_dir}",
        *tiny,
        *(f"{key}={value}" for key, value in short.items()),
        *args,
    )


def _trials(sweep_dir: Path) -> list[Path]:
    return sorted((p for p in sweep_dir.iterdir() if (p / ".hydra").is_dir()), key=lambda p: int(p.name))


def _proposed(sweep_dir: Path, key: str) -> list[float]:
    values = []
    for trial in _trials(sweep_dir):
        overrides = OmegaConf.to_container(OmegaConf.load(trial / ".hydra" / "overrides.yaml"))
        (value,) = [float(o.split("=", 1)[1]) for o in overrides if o.startswith(f"{key}=")]
        values.append(value)
    return values


def _optuna_proposals(seed: int, n: int) -> list[float]:
    """What a fresh Optuna study with TPE seeded `seed` proposes for the same search space."""
    import optuna

    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    trials = [study.ask() for _ in range(n)]
    return [t.suggest_float("optim.lr", 1e-4, 1e-2, log=True) for t in trials]


@pytest.mark.slow  # trains a trial or more: seconds each
def test_an_optuna_sweep_scores_its_trials_by_their_records_and_follows_its_seed(tmp_path, cli_here):
    from zoo.compare.runs import read_run

    sweep = tmp_path / "sweep"
    # the recipe flag after the overrides, as docs/ablations.md writes the command
    result = _sweep(cli_here, sweep, f"optim.lr={LR}", "-cn", "config")
    assert result.returncode == 0, result.stderr[-3000:]
    lrs = _proposed(sweep, "optim.lr")
    # the sampler's seed decides the proposals: those of a fresh study with the same seed
    assert lrs == pytest.approx(_optuna_proposals(7, 2), rel=1e-12)
    assert lrs != pytest.approx(_optuna_proposals(8, 2), rel=1e-6)
    # the score of each trial is its record's final val/loss, as zoo-compare reads it
    finals = [read_run(trial).final("val/loss") for trial in _trials(sweep)]
    assert all(f is not None for f in finals) and len(finals) == 2
    best = OmegaConf.load(sweep / "optimization_results.yaml")
    assert best.best_value == pytest.approx(min(finals), rel=1e-12)
    assert best.best_params["optim.lr"] == pytest.approx(lrs[finals.index(min(finals))], rel=1e-12)
    # the trials are ordinary runs: a tuned report from them
    report = cli_here("compare", str(sweep), "tune=optim.lr", f"out={tmp_path / 'report'}")
    assert report.returncode == 0, report.stderr[-3000:]
    assert '"runs": 2' in report.stdout and (tmp_path / "report" / "tuning.png").is_file()


@pytest.mark.slow  # trains a trial or more: seconds each
def test_two_optuna_sweeps_with_the_same_seed_propose_the_same_parameters(tmp_path, cli_here):
    proposals = []
    for name in ("first", "again"):
        result = _sweep(
            cli_here, tmp_path / name, f"optim.lr={LR}", "optim.weight_decay=interval(0,0.1)", seed=3, trials=3
        )
        assert result.returncode == 0, result.stderr[-3000:]
        proposals.append((_proposed(tmp_path / name, "optim.lr"), _proposed(tmp_path / name, "optim.weight_decay")))
    assert proposals[0] == proposals[1]
    assert len(set(proposals[0][0])) == 3  # a search, not one value three times


@pytest.mark.slow  # trains a trial or more: seconds each
def test_a_trial_that_does_not_finish_is_scored_as_failed_and_named(tmp_path, cli_here):
    """n_heads=3 does not divide d_model=32: that trial is refused when it starts (failed.json),
    returns no score, and Optuna records it failed; the other trial is the best; the sweep
    exits 1 naming the failed run directory, as any sweep with a failed arm does. (The random
    sampler seeded 0 proposes 3, then 2.)"""
    sweep = tmp_path / "sweep"
    result = _sweep(cli_here, sweep, "hydra/sweeper/sampler=random", "model.n_heads=choice(2,3)", seed=0)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Failed experiment: Return value must be float-castable. Got 'None'" in result.stdout + result.stderr
    assert "1 of 2 arm(s) of the sweep" in result.stderr
    failed = [t for t in _trials(sweep) if (t / "failed.json").is_file()]
    assert len(failed) == 1 and str(failed[0]) in result.stderr
    assert "model.n_heads=3" in (failed[0] / ".hydra" / "overrides.yaml").read_text().replace(" ", "")
    assert OmegaConf.load(sweep / "optimization_results.yaml").best_params["model.n_heads"] == 2


@pytest.mark.slow  # trains a trial or more: seconds each
def test_a_sweep_whose_every_trial_fails_ends_with_the_line_naming_them(tmp_path, cli_here):
    """Trials that fail where they run (here the data file each one reads is missing): with no
    finished trial Optuna has no best one and the sweeper stops with its error, said on one line
    (no traceback); zoo-train's last line still names the failed runs."""
    sweep = tmp_path / "sweep"
    missing = tmp_path / "missing.txt"
    result = _sweep(cli_here, sweep, "model.n_heads=choice(1,2)", "data=local", f"data.path={missing}")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "zoo-train: error: the sweep stopped: " in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("zoo-train: 2 of 2 arm(s) of the sweep") and f"{sweep}/0/failed.json" in last, last


@pytest.mark.parametrize("sweeper", ["hydra/sweeper=basic", "hydra/sweeper=optuna"])
def test_a_sweep_none_of_whose_arms_is_a_valid_run_is_one_line_before_anything_is_written(sweeper, tmp_path, cli_here):
    """n_heads=3 and 5 each fail to divide d_model=32: every arm breaks the same rule, so the
    sweep is refused as the same command without -m is, with nothing written; a sweep with one
    valid arm runs (test_a_trial_that_does_not_finish_is_scored_as_failed_and_named)."""
    sweep = tmp_path / "sweep"
    if sweeper.endswith("optuna"):
        result = _sweep(cli_here, sweep, "model.n_heads=choice(3,5)")
    else:
        tiny = [o for o in tiny_overrides() if not o.startswith("model.n_heads=")]
        result = cli_here("train", "-m", sweeper, f"hydra.sweep.dir={sweep}", *tiny, "model.n_heads=3,5")
    errors = [line for line in result.stderr.splitlines() if line.startswith("zoo-train")]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert errors == [
        "zoo-train: error: no arm of the sweep is a valid run: all 2 are refused (the first, "
        "model.n_heads=3): model.d_model (32) must be divisible by model.n_heads (3), or set model.head_dim"
    ]
    assert not sweep.exists()


def test_a_sweep_its_sweeper_refuses_leaves_no_directory(tmp_path, cli_here, monkeypatch):
    """Optuna's grid sampler takes no interval: the sweeper refuses before any trial, on one line,
    and the sweep directory zoo-train made for it (multirun/DATE/TIME) is gone."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", "-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=grid", f"optim.lr={LR}")
    assert result.returncode == 1, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("zoo-train")]
    assert lines == [
        "zoo-train: error: the sweep stopped: ValueError: GridSampler only supports discrete distributions."
    ]
    assert "Traceback" not in result.stderr and list(tmp_path.glob("multirun/*/*")) == []


@pytest.mark.parametrize(
    "space, words",
    [
        ("interval(1e-2,1e-4)", "an interval runs from its low end to its high end"),
        ("tag(log,interval(0,1e-2))", "a log-scale interval starts above 0"),
    ],
)
def test_a_search_space_optuna_would_refuse_is_one_line_before_anything_is_written(
    space, words, tmp_path, cli_here, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", "-m", "hydra/sweeper=optuna", f"optim.lr={space}")
    assert result.returncode == 2 and result.stderr.strip() == f"zoo-train: error: optim.lr={space}: {words}"
    assert list(tmp_path.iterdir()) == []


FINITE = "a sweep's values are finite numbers, got"
EMPTY = "the range holds no values; range(START,STOP[,STEP]) runs from START up to STOP, STOP left out"


@pytest.mark.parametrize(
    "sweeper, override, words",
    [
        ("optuna", "optim.lr=interval(nan,1)", f"{FINITE} nan"),  # Optuna: OverflowError, no key named
        ("optuna", "optim.lr=tag(log,interval(1e-4,inf))", f"{FINITE} inf"),
        ("basic", "optim.lr=-inf,1e-3", f"{FINITE} -inf"),
        ("optuna", "optim.lr=choice(nan,1e-3)", f"{FINITE} nan"),
        ("basic", "model.d_model=range(1,inf)", f"{FINITE} inf"),  # listing it never ends
        ("basic", "model.d_model=range(32,64,0)", "a range's step is not 0"),
        ("basic", "model.d_model=range(64,64)", f"{EMPTY} (range(64,65) is 64 alone)"),  # "requires --multirun"
        ("basic", "model.d_model=range(64,32)", f"{EMPTY} (range(64,65) is 64 alone)"),
        (
            "optuna",
            "model.d_model=range(64,32)",
            "Optuna's range runs from its low end up to its high end (both included)",
        ),
    ],
)
def test_a_sweep_value_its_sweeper_cannot_use_is_one_line_naming_it(
    sweeper, override, words, tmp_path, cli_here, monkeypatch
):
    """NaN, an infinite end, a zero step or a range with no value: refused on one line that names
    the override, before the sweep directory is made."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", "-m", f"hydra/sweeper={sweeper}", override)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == f"zoo-train: error: {override}: {words}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "word, meant",
    [
        ("+hydra.sweeper.params.model.d_model=choice(32,64)", "model.d_model=choice(32,64)"),
        ("hydra.sweeper.params.seed=0,1", "seed=0,1"),
    ],
)
@pytest.mark.parametrize("recipe", [[], ["-cn", "tune_lr_optuna"]])
def test_a_sweep_key_given_under_the_sweepers_params_is_one_line_with_the_override_meant(
    word, meant, recipe, tmp_path, cli_here, monkeypatch
):
    """Hydra reads the dots of `hydra.sweeper.params.model.d_model` as nesting, and cannot add a
    key below params that hold null (an AssertionError from OmegaConf): the line gives the
    override that sweeps the key."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", "-m", "hydra/sweeper=optuna", *recipe, word)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == (
        f"zoo-train: error: {word}: on the command line a sweep's key is an override of its own: -m {meant} "
        "(hydra.sweeper.params is a recipe's mapping of KEY: VALUES)"
    )
    assert list(tmp_path.iterdir()) == []
