"""The one rule for sweepers and launchers (zoo.config.safety.plugins): an option is admitted when
Hydra or a listed plugin ships it; every other is refused on one line before anything is written."""

from __future__ import annotations

import pytest

from zoo.cli.compose import compose
from zoo.config.errors import ConfigError
from zoo.config.safety.hydra_section import HYDRA_GROUPS
from zoo.config.safety.plugins import PACKAGES, SHIPPED


def _providers() -> dict[tuple[str, str], str]:
    """(group, option) -> the provider that stored it in Hydra's ConfigStore, once Hydra has
    discovered the installed plugins (as zoo-train's composition makes it do)."""
    from hydra.core.config_store import ConfigStore

    compose(["hydra/sweeper=optuna"], return_hydra_config=True, check=False)  # loads the plugins
    repo = ConfigStore.instance().repo
    out = {}
    for group in SHIPPED:
        node = repo
        for part in group.split("/"):
            node = node.get(part, {})
        for name, entry in node.items():
            if name.endswith(".yaml") and hasattr(entry, "provider"):
                out[(group, name[: -len(".yaml")])] = entry.provider
    return out


PROVIDERS = _providers()


@pytest.mark.parametrize(
    "group, option, provider",
    [(g, o, p) for g, options in SHIPPED.items() for o, p in options.items() if p != "zoo"],
)
def test_each_admitted_option_is_the_one_its_listed_package_ships(group, option, provider):
    """An option cannot be admitted in the name of a package that does not define it."""
    assert PROVIDERS.get((group, option)) == provider, PROVIDERS
    assert provider in PACKAGES


def test_zoos_own_launcher_builds_on_a_listed_plugins_option():
    cfg = compose(["hydra/launcher=slurm"], return_hydra_config=True, check=False)
    assert cfg.hydra.runtime.choices["hydra/launcher"] == "slurm"
    assert cfg.hydra.launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


def test_the_groups_follow_the_table():
    for group, options in SHIPPED.items():
        assert HYDRA_GROUPS[group] == tuple(options)


def test_an_installed_option_no_listed_package_ships_is_refused():
    """Installed is not admitted: an option a package stores in Hydra's ConfigStore, even one
    naming Hydra's own launcher class, is refused while the table does not list it."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    target = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    store.store(group="hydra/launcher", name="unlisted", node={"_target_": target}, provider="elsewhere")
    try:
        with pytest.raises(ConfigError, match="a listed plugin ships it") as caught:
            compose(["hydra/launcher=unlisted"], return_hydra_config=True, check=False)
        assert "hydra/launcher=unlisted is refused" in str(caught.value)
    finally:
        store.repo["hydra"]["launcher"].pop("unlisted.yaml")


@pytest.mark.parametrize("choice", ["hydra/sweeper=ax", "hydra/launcher=joblib", "hydra/launcher=ray"])
def test_a_sweeper_or_launcher_no_listed_plugin_ships_is_refused_before_anything_is_written(cli_here, tmp_path, choice):
    run, sweep = tmp_path / "run", tmp_path / "sweep"
    result = cli_here("train", "-m", choice, f"hydra.run.dir={run}", f"hydra.sweep.dir={sweep}", "seed=0,1")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "a listed plugin ships it" in lines[0], result.stderr
    assert not run.exists() and not sweep.exists()
