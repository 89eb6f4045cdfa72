"""Where zoo's config trees live: inside the installed package (the wheel ships the top-level
conf/ and recipes/ as `zoo.conf` and `zoo.recipes`) or, in a source checkout, beside zoo/."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

CONFIG_NAME = "config"
CHECKOUT = Path(__file__).resolve().parents[2]


def packaged_or_checkout(module: str, folder: str) -> Optional[str]:
    """A Hydra search-path entry: "pkg://MODULE" when importable, else the absolute path of
    FOLDER in a source checkout, else None."""
    try:
        if importlib.util.find_spec(module) is not None:
            return f"pkg://{module}"
    except ModuleNotFoundError:
        pass
    path = CHECKOUT / folder
    return str(path) if path.is_dir() else None


def config_source() -> str:
    """The primary config tree, as a Hydra config path."""
    source = packaged_or_checkout("zoo.conf", "conf")
    if source is None:
        raise RuntimeError("zoo's config files are missing; reinstall zoo with `pip install .`")
    return source


def recipe_names() -> list[str]:
    """The recipes `-cn NAME` can run (recipes/*.yaml, packaged or in a checkout)."""
    import importlib.resources

    try:
        files = importlib.resources.files("zoo.recipes").iterdir()
        names = [f.name for f in files]
    except (ModuleNotFoundError, FileNotFoundError, TypeError):
        folder = CHECKOUT / "recipes"
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    return sorted(n[:-len(".yaml")] for n in names if n.endswith(".yaml"))


def recipe_groups(name: str, _seen: Optional[set] = None) -> set[str]:
    """The config groups a recipe chooses in its defaults list (`override model: gpt`,
    `arm/norm: baseline`), its parent recipes' included (`- ablate_norm`); empty for a name
    that is not a recipe."""
    import importlib.resources

    import yaml

    seen = _seen if _seen is not None else set()
    if name in seen or name == CONFIG_NAME:
        return set()
    seen.add(name)
    try:
        text = importlib.resources.files("zoo.recipes").joinpath(f"{name}.yaml").read_text()
    except (ModuleNotFoundError, FileNotFoundError, TypeError):
        path = CHECKOUT / "recipes" / f"{name}.yaml"
        if not path.is_file():
            return set()
        text = path.read_text()
    groups: set[str] = set()
    for entry in (yaml.safe_load(text) or {}).get("defaults", []) or []:
        if isinstance(entry, str) and entry != "_self_":
            groups |= recipe_groups(entry, seen)
        elif isinstance(entry, dict):
            groups |= {str(key).removeprefix("override ").strip() for key in entry}
    return groups
