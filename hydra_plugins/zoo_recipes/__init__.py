"""Puts zoo's recipes/ on Hydra's config search path, so a recipe is a primary config:
`zoo-train -cn vaswani_base`. Hydra discovers this through the `hydra_plugins` namespace."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


def recipes_source() -> str | None:
    """pkg://zoo.recipes when installed (the wheel ships recipes/ there), else the recipes/
    directory of a source checkout."""
    try:
        if importlib.util.find_spec("zoo.recipes") is not None:
            return "pkg://zoo.recipes"
    except ModuleNotFoundError:
        pass
    checkout = Path(__file__).resolve().parents[2] / "recipes"
    return f"file://{checkout}" if checkout.is_dir() else None


class ZooRecipesSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        source = recipes_source()
        if source is not None:
            search_path.append(provider="zoo-recipes", path=source)
