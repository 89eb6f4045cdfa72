"""Puts zoo's recipes/ on Hydra's config search path, so a recipe is a primary config:
`zoo-train -cn vaswani_base`. Hydra discovers this through the `hydra_plugins` namespace."""

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
