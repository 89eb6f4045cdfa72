"""zoo's additions to Hydra's config search path, through Hydra's public plugin API: its recipes/,
so a recipe is a primary config (`zoo-train -cn vaswani_base`), and, while `zoo.config.paths.command_line_dirs`
is open, the directories a `-cd` names, where Hydra's own `-cd` puts them (after the primary
tree and the plugins' entries). `zoo.compose` composes with `-cd` directories this way; Hydra's
public `compose` takes no search path. Hydra discovers this module through the `hydra_plugins`
namespace, and zoo registers it by name as well (`zoo.config.paths.use_recipes`): an editable
install leaves no folder in that namespace for Hydra's scan to list."""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


def recipes_source() -> str | None:
    from zoo.config.paths import packaged_or_checkout

    source = packaged_or_checkout("zoo.recipes", "recipes")
    if source is not None and not source.startswith("pkg://"):
        source = f"file://{source}"
    return source


class ZooRecipesSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        source = recipes_source()
        if source is not None:
            search_path.append(provider="zoo-recipes", path=source)
        from zoo.config.paths import command_line_entries  # zoo's module: Hydra's scan re-runs this one

        for path in command_line_entries():
            search_path.append(provider="command-line", path=path)
