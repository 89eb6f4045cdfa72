"""Where zoo's config trees live: inside the installed package (the wheel ships the top-level
conf/ and recipes/ as `zoo.conf` and `zoo.recipes`) or, in a source checkout, beside zoo/."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

CONFIG_NAME = "config"
CHECKOUT = Path(__file__).resolve().parents[2]


def packaged_or_checkout(module: str, folder: str) -> str | None:
    """A Hydra search-path entry: "pkg://MODULE" when importable, else the absolute path of
    FOLDER in a source checkout, else None."""
    try:
        if importlib.util.find_spec(module) is not None:
            return f"pkg://{module}"
    except ModuleNotFoundError:
        pass
    path = CHECKOUT / folder
    return str(path) if path.is_dir() else None


def use_recipes() -> None:
    """zoo's search-path plugin (`hydra_plugins.zoo_recipes`: the recipes, `-cn NAME`) registered
    with Hydra by name, however zoo is installed. Hydra finds plugins by listing the folders of
    the `hydra_plugins` namespace, and an editable install (`pip install -e .`) maps the plugin's
    module from the checkout without a folder there to list: `-cn quick` was then not found."""
    from hydra.core.plugins import Plugins

    plugins = Plugins.instance()  # Hydra's own scan first: it runs again a module it lists
    plugins.register(importlib.import_module("hydra_plugins.zoo_recipes").ZooRecipesSearchPathPlugin)


_COMMAND_LINE_DIRS: list[str] = []  # file:// entries, while command_line_dirs is open


@contextmanager
def command_line_dirs(dirs: Iterable[str]) -> Iterator[None]:
    """Search paths Hydra makes inside this block hold `dirs` where `-cd` would put them: zoo's
    search-path plugin (`hydra_plugins.zoo_recipes`) reads them, since Hydra's public `compose`
    takes no search path."""
    saved = list(_COMMAND_LINE_DIRS)
    _COMMAND_LINE_DIRS[:] = [f"file://{Path(d).resolve()}" for d in dirs]
    try:
        yield
    finally:
        _COMMAND_LINE_DIRS[:] = saved


def command_line_entries() -> list[str]:
    return list(_COMMAND_LINE_DIRS)


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
    return sorted(n[: -len(".yaml")] for n in names if n.endswith(".yaml"))


def recipe_groups(name: str, _seen: set | None = None) -> set[str]:
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


def own_config_files() -> set[str]:
    """The files of zoo's primary config tree, as paths relative to it ("config.yaml",
    "optim/adamw.yaml"): the names a `-cd` directory cannot use, since Hydra's search path
    reads zoo's tree before any `-cd` directory."""
    import importlib.resources

    try:
        root = importlib.resources.files("zoo.conf")
    except (ModuleNotFoundError, TypeError):
        root = CHECKOUT / "conf"
    found: set[str] = set()
    stack = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(folder.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_dir():
                stack.append((entry, f"{prefix}{entry.name}/"))
            elif entry.name.endswith(".yaml"):
                found.add(prefix + entry.name)
    return found


def shadowed_files(config_dir: str | Path) -> list[str]:
    """The config files of a `-cd` directory that Hydra would never read, because zoo's own
    tree holds a file of the same name, found first: `config.yaml` (the primary config without
    `-cn`, and what a recipe's `defaults: [config]` reads, whatever `-cn` names) and any group
    option (`optim/adamw.yaml`). Only the names zoo's tree holds are looked at, so nothing else
    in the directory is read."""
    directory = Path(config_dir)
    return [name for name in sorted(own_config_files()) if (directory / name).is_file()]
