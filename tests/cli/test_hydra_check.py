"""The `hydra:` section of a composition from zoo's own files is checked without a reference
composition (zoo.cli.hydra_check): these tests hold every file of zoo's own tree to zoo's own
section, so that only the command line's overrides can change it there, and show that a config
from elsewhere is still compared with the reference leaf by leaf."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from zoo.cli import compose as composing
from zoo.cli.hydra_check import own_sources
from zoo.config.errors import ConfigError
from zoo.config.safety.hydra_section import check_group_choices, leaves, setting_check

ROOT = Path(__file__).resolve().parents[2]


def _hydra(cfg) -> dict:
    plain = OmegaConf.to_container(cfg.hydra, resolve=False)
    assert isinstance(plain, dict)
    return plain


def test_every_recipe_sets_only_checked_hydra_settings():
    """Each recipe's own `hydra:` keys are settings whose values pass their rules, and the Hydra
    group options it chooses are zoo's (read from the files, each recipe apart: a recipe that
    includes another is checked with it). So a recipe's section differs from zoo's own only where
    the reference comparison would let it."""
    checked = 0
    for path in sorted((ROOT / "recipes").glob("*.yaml")):
        body = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        assert _package(path.read_text(encoding="utf-8")) in (None, "_global_"), path.name
        for entry in body.get("defaults") or []:
            if isinstance(entry, dict):
                for key, option in entry.items():
                    group = str(key).removeprefix("override ").strip()
                    if group.startswith("hydra/"):
                        check_group_choices({group: option})
        for key, value in (leaves(body["hydra"]) if "hydra" in body else {}).items():
            check = setting_check(key)
            if check is not None:
                check(key, value)
            checked += 1
    assert checked > 10


def test_a_recipe_composed_passes_the_reference_comparison():
    """A recipe that chooses Hydra's groups (the Optuna sweeper) and sets its search, composed:
    zoo's own sources, and the comparison with the reference finds nothing refused."""
    cfg = composing.compose([], config_name="tune_lr_optuna", return_hydra_config=True, check=False)
    assert own_sources(_hydra(cfg))
    composing._check_hydra(cfg, [], reference=True)  # raises ConfigError on a difference


def _package(text: str) -> str | None:
    first = text.splitlines()[0] if text else ""
    return first.split("@package", 1)[1].strip() if "@package" in first else None


def test_no_option_of_a_config_group_sets_a_hydra_key():
    """Only conf/config.yaml (zoo's own section) and the options of Hydra's groups (conf/hydra/,
    chosen as hydra/GROUP=OPTION, which the reference is composed with) write under `hydra`."""
    checked = 0
    for path in sorted((ROOT / "conf").rglob("*.yaml")):
        relative = path.relative_to(ROOT / "conf")
        if relative.parts[0] == "hydra" or relative == Path("config.yaml"):
            continue
        text = path.read_text(encoding="utf-8")
        package = _package(text)
        body = yaml.safe_load(text) or {}
        assert not (package or "").startswith("hydra"), relative
        if package == "_global_":
            assert "hydra" not in body, relative
        checked += 1
    assert checked > 50


def test_zoos_own_composition_makes_no_reference(monkeypatch):
    made: list[tuple] = []
    monkeypatch.setattr(composing, "_REFERENCES", {})
    real = composing._compose_raw

    def counted(*args):
        made.append(args)
        return real(*args)

    monkeypatch.setattr(composing, "_compose_raw", counted)
    cfg = composing.compose(["hydra.run.dir=runs/x", "model.d_model=64"], return_hydra_config=True, check=False)
    assert cfg.hydra.run.dir == "runs/x"
    assert len(made) == 1 and composing._REFERENCES == {}


def _elsewhere(tmp_path: Path, hydra_lines: str) -> Path:
    directory = tmp_path / "mine"
    directory.mkdir()
    (directory / "my_run.yaml").write_text(f"defaults:\n  - config\n  - _self_\n\n{hydra_lines}")
    return directory


def test_a_config_from_elsewhere_is_compared_with_the_reference(tmp_path):
    """A -cd recipe that changes zoo's own setting (hydra.job.chdir) is refused; the same recipe
    without it composes. Its sources are not zoo's own, so the reference is what it is held to."""
    directory = _elsewhere(tmp_path, "hydra:\n  job:\n    chdir: true\n")
    with pytest.raises(ConfigError, match="hydra.job.chdir is refused"):
        composing.compose([], config_name="my_run", config_dirs=[str(directory)], check=False)
    (directory / "my_run.yaml").write_text("defaults:\n  - config\n  - _self_\n\nseed: 3\n")
    cfg = composing.compose([], config_name="my_run", config_dirs=[str(directory)], return_hydra_config=True)
    assert cfg.seed == 3 and not own_sources(_hydra(cfg))


@pytest.mark.parametrize(
    "override, words",
    [
        ("hydra.job.name=..", "one word"),
        ("hydra.output_subdir=../../elsewhere", "go to the run's .hydra/"),
        ("+hydra.job.env_set.PATH=/tmp", "a config may set only variables"),
    ],
)
def test_an_overridden_setting_is_checked_without_a_reference(override, words, monkeypatch):
    """The settings a command line overrides in zoo's own composition are checked by their rules
    (the same as a difference from the reference is)."""
    monkeypatch.setattr(composing, "_REFERENCES", {})
    with pytest.raises(ConfigError, match=words):
        composing.compose([override], return_hydra_config=True, check=False)
    assert composing._REFERENCES == {}


def test_compose_leaves_hydra_as_it_found_it_and_composes_nothing_inside_an_application(tmp_path):
    """zoo.compose initialises Hydra through its public API and leaves it uninitialised after;
    inside an initialised Hydra (a task function's), it refuses on one line instead of clearing
    the application's state."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    composing.compose(["model.d_model=64"], check=False)
    assert not GlobalHydra.instance().is_initialized()
    with initialize_config_dir(str(tmp_path), version_base="1.3"):
        with pytest.raises(ConfigError, match="outside a Hydra application") as caught:
            composing.compose([], check=False)
        assert "\n" not in str(caught.value)
        assert GlobalHydra.instance().is_initialized()  # the application's Hydra is untouched
