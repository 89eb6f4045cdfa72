"""`zoo.compose`: the same config `zoo-train` runs with, from Python."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.cli.hydra_check import check_job_subdir, check_overridden_settings, own_sources
from zoo.cli.spelling import misspelled
from zoo.config.errors import ConfigError, explain
from zoo.config.paths import CONFIG_NAME, config_source, shadowed_files
from zoo.config.records.yaml_files import check_config_dirs
from zoo.config.safety.hydra_section import (
    HYDRA_GROUPS,
    check_hydra_overrides,
    check_hydra_section,
    check_searchpath,
)
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.sections import check_deletions, check_sections
from zoo.config.schema.store import register_configs


def check_model(cfg: DictConfig) -> DictConfig:
    """The model section's own checks (`zoo.config.schema.validate` checks the whole run)."""
    as_model_config(cfg.model)
    return cfg


def compose(
    overrides: Iterable[str] | None = None,
    config_name: str = CONFIG_NAME,
    *,
    config_source_dir: str | None = None,
    config_dirs: Iterable[str] = (),
    return_hydra_config: bool = False,
    check: bool = True,
    command_line: Iterable[str] | None = None,
) -> DictConfig:
    """Compose `conf/config.yaml` with Hydra command-line style overrides, e.g.
    `zoo.compose(["model=llama", "model/position=alibi", "model.d_model=256"])`, and validate it.
    With no overrides this is exactly what `zoo-train` runs with no arguments; `config_name`
    picks a recipe instead (`zoo.compose(config_name="numbers_seq2seq")` = `zoo-train -cn
    numbers_seq2seq`).

    As on the command line, `config_source_dir` replaces the primary config directory (`-cp`)
    and `config_dirs` are searched too (`-cd`). `return_hydra_config` keeps the `hydra:`
    section; `check=False` skips the model checks. The object names in the config are always
    checked against the allow-list of `zoo.config.safety.targets`, and a tracking server must be
    one `command_line` names (default: `overrides`; zoo-train passes its own command line when it
    composes a sweep's values from a config file: `zoo.config.safety.trackers`). With
    `init_from=hf:DIR` the model and tokenizer sections are DIR's (`zoo.interop.hf.init_from`)."""
    from zoo.config.safety.targets import check_config_targets
    from zoo.run.resolvers import register_resolvers

    register_configs()
    register_resolvers()
    overrides = list(overrides or [])
    check_hydra_overrides(overrides)  # before Hydra reads them
    check_deletions(overrides)
    _check_not_shadowed(config_dirs, config_source_dir)
    cfg = _compose_raw(overrides, config_name, config_source_dir or config_source(), config_dirs)
    check_sections(cfg)
    check_config_targets(cfg)
    _check_tracker(cfg, overrides if command_line is None else list(command_line))
    _check_hydra(cfg, overrides)
    cfg = with_init_from(cfg, overrides)
    if not return_hydra_config:
        with open_dict(cfg):
            del cfg["hydra"]
    return check_model(cfg) if check else cfg


def _check_tracker(cfg: DictConfig, command_line: list[str]) -> None:
    """The tracking URI is a server the command line names (each value of a sweep's) or a store
    in the run directory."""
    from omegaconf.errors import OmegaConfBaseException

    from zoo.cli.hydra_args import sweep_variants
    from zoo.config.safety.trackers import KEY, check_tracking_uri, named_servers

    try:
        uri = OmegaConf.select(cfg, KEY, default=None)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{KEY}: {explain(exc)}") from None
    named = set().union(*(named_servers(variant) for variant in sweep_variants(command_line)))
    check_tracking_uri(uri, named)


def _check_not_shadowed(config_dirs: Iterable[str], primary: str | None) -> None:
    """A `-cd` directory's file that zoo's own config tree also holds is never read (Hydra
    searches zoo's tree first): refused on one line that says what to name it, instead of a run
    of zoo's file without a word. (With another primary tree, `-cp`, zoo's files are not read.)"""
    if primary is not None and primary != config_source():
        return
    for directory in config_dirs:
        shadowed = shadowed_files(directory)
        if not shadowed:
            continue
        name = shadowed[0]
        if name == f"{CONFIG_NAME}.yaml":
            raise ConfigError(
                f"-cd {directory}: its {name} is never read (zoo's own {name} comes first in "
                f"Hydra's search path); rename it, e.g. to {Path(directory) / 'my_run.yaml'}, "
                f"and give -cn my_run"
            )
        group, _, option = name.rpartition("/")
        option = option.removesuffix(".yaml")
        raise ConfigError(
            f"-cd {directory}: its {name} is never read (zoo's own {name} comes first in "
            f"Hydra's search path); give it a name of its own, e.g. {group}/my_{option}.yaml, "
            f"and choose it with {group}=my_{option}"
        )


def with_init_from(cfg: DictConfig, overrides: Iterable[str]) -> DictConfig:
    """`cfg` with the model and tokenizer of `init_from=hf:DIR` (`zoo.interop.hf.init_from`);
    `cfg` itself without init_from. The one step that turns a composition into the config a run
    trains: zoo.compose's own, and Hydra's for a job zoo-train did not claim before Hydra started
    (a job of a sweep, a rank a launcher started)."""
    if OmegaConf.select(cfg, "init_from", default=None) is None:
        return cfg
    from zoo.interop.hf.init_from import apply_init_from  # loads torch: only for init_from=

    return apply_init_from(cfg, overrides)


@contextmanager
def hydra_at(primary: str, config_dirs: Iterable[str]):
    """Hydra initialised through its public API over zoo's search path (`primary`, as -cp gives
    it, then each -cd directory where Hydra's -cd puts it: `zoo.config.paths.command_line_dirs`);
    `initialize_config_dir` (or `_module`) puts Hydra back as it found it on leaving. Yields
    Hydra's config loader. Inside a running Hydra application (whose job owns Hydra's state)
    zoo composes nothing: refused on one line."""
    from hydra import initialize_config_dir, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from zoo.config.paths import command_line_dirs, use_recipes

    if GlobalHydra.instance().is_initialized():
        raise ConfigError(
            "zoo.compose runs outside a Hydra application (Hydra is initialised here); in a task "
            "function, use the config Hydra passed it"
        )
    use_recipes()
    with command_line_dirs(config_dirs):  # read while Hydra makes its search path
        init: Any
        if primary.startswith("pkg://"):
            init = initialize_config_module(primary[len("pkg://") :], job_name="train", version_base="1.3")
        else:
            init = initialize_config_dir(primary.removeprefix("file://"), job_name="train", version_base="1.3")
    with init:
        yield GlobalHydra.instance().config_loader()


def _group_options(loader, group: str, kind: Any = None) -> list[str]:
    """The options (`kind` CONFIG) or subgroups (GROUP) of `group` over the loader's config
    sources, as Hydra's `get_group_options` lists them; read from the sources themselves
    (`ConfigLoader.get_sources`), since `get_group_options` copies the whole repository on
    every call (25 ms each, 140 calls to list every group)."""
    from hydra.core.object_type import ObjectType

    found: set[str] = set()
    for source in loader.get_sources():
        if source.is_group(config_path=group):
            found.update(source.list(config_path=group, results_filter=kind or ObjectType.CONFIG))
    return sorted(found)


def _all_groups(loader, parent: str = "") -> list[str]:
    """Every config group of the loader's search path (`model`, `model/position`, ...)."""
    from hydra.core.object_type import ObjectType

    groups: list[str] = []
    for group in _group_options(loader, parent, ObjectType.GROUP):
        name = f"{parent}/{group}" if parent else group
        if _group_options(loader, name, ObjectType.CONFIG):
            groups.append(name)
        if _group_options(loader, name, ObjectType.GROUP):
            groups.extend(_all_groups(loader, name))
    return groups


def config_groups(
    source: str | None, dirs: Iterable[str], listed_hydra_groups: Iterable[str] = ()
) -> dict[str, list[str]]:
    """Every config group of the search path (zoo's own, and the Hydra groups named) -> its
    options."""
    listed = tuple(listed_hydra_groups)
    with hydra_at(source or config_source(), dirs) as loader:
        names = [g for g in _all_groups(loader) if not g.startswith("hydra") or g in listed]
        return {g: _group_options(loader, g) for g in sorted(names)}


def _compose_raw(overrides: list[str], config_name: str, primary: str, config_dirs: Iterable[str]) -> DictConfig:
    """Hydra's composition, with its `hydra` section, errors as one ConfigError line."""
    import yaml
    from hydra import compose as hydra_compose
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    config_dirs = list(config_dirs)
    try:
        with hydra_at(primary, config_dirs) as loader:
            primary = _as_source(primary)
            foreign = _check_files_first(loader, primary, config_dirs, config_name, overrides)
            if foreign:  # zoo's own configs name no file outside conf/ and recipes/
                _check_defaults_stay_home(loader, config_name, overrides)
            try:
                return hydra_compose(config_name, overrides, return_hydra_config=True)
            except (HydraException, OmegaConfBaseException) as exc:  # a group with a dot, a list without -m
                groups = {group: _group_options(loader, group) for group in _all_groups(loader)}
                better = misspelled(overrides, groups, explain(exc))
                if better is not None:
                    raise better from None
                raise
    except ConfigError:
        raise
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(explain(exc)) from exc
    except AttributeError as exc:  # OmegaConf merging a dict into a null key: hydra.sweeper.params={...}
        given = [o for o in overrides if "={" in o and f"full_key: {o.split('=', 1)[0].lstrip('+~')}" in str(exc)]
        if not given:
            raise
        raise ConfigError(
            f"{given[0]}: Hydra cannot merge a mapping into a key that holds null; sweep on the command "
            f"line instead (-m KEY=A,B), or in a recipe's hydra.sweeper.params"
        ) from None
    except yaml.YAMLError as exc:  # a config file that is not YAML
        where = getattr(exc, "problem_mark", None)
        place = f"{where.name}, line {where.line + 1}" if where is not None else "a config file"
        raise ConfigError(f"{place}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    except ValueError as exc:  # Hydra's defaults list, e.g. `model=true` (a bool, not an option name)
        if "Config group override" not in str(exc):
            raise ConfigError(explain(exc)) from exc
        bad = [o for o in overrides if "=" in o and "." not in o.split("=", 1)[0]]
        raise ConfigError(
            f"{explain(exc)} (in {' '.join(bad) or ' '.join(overrides)}); a config group "
            f"takes an option name, e.g. model=gpt"
        ) from exc


def check_config_files(
    overrides: list[str],
    config_name: str = CONFIG_NAME,
    *,
    config_source_dir: str | None = None,
    config_dirs: Iterable[str] = (),
) -> None:
    """The YAML files of every config directory a command line names (-cd, -cp, hydra.searchpath),
    checked as `compose` checks them, for a command Hydra answers without zoo composing first
    (`--info`, `--shell-completion`)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    primary = config_source_dir or config_source()
    primary = _as_source(primary)
    config_dirs = list(config_dirs)
    try:
        with hydra_at(primary, config_dirs) as loader:
            _check_files_first(loader, primary, config_dirs, config_name, overrides)
    except ConfigError:
        raise
    except (HydraException, OmegaConfBaseException, ValueError):
        return  # not what a file holds: Hydra reports it itself


def _check_files_first(loader, primary: str, config_dirs: list[str], config_name: str, overrides: list[str]) -> bool:
    """Every YAML file of the config directories from elsewhere (-cd, -cp) and of the
    `hydra.searchpath` entries, checked before Hydra, or the search path's own check, reads one
    (`zoo.config.records.yaml_files`: aliases refused before they expand). Whether any config
    directory is from elsewhere."""
    foreign = bool(config_dirs) or primary != _own_primary()
    if foreign:
        check_config_dirs([*config_dirs, *([primary] if primary != _own_primary() else [])])
    check_config_dirs(_check_searchpath_first(loader, config_name, overrides, foreign))
    return foreign


def _as_source(primary: str) -> str:
    """A config directory as a Hydra search-path entry: a `pkg://` or `file://` URL."""
    return primary if primary.startswith(("pkg://", "file://")) else f"file://{primary}"


def _own_primary() -> str:
    return _as_source(config_source())


def _check_searchpath_first(loader, config_name: str, overrides: list[str], foreign: bool) -> list[str]:
    """`hydra.searchpath` as Hydra will read it (an override, else the primary config's own, when
    that may come from elsewhere), checked before Hydra reads it: a `pkg://` entry imports its
    package, running its code. Its entries (none when it is not set), whose files are checked
    next (`zoo.config.records.yaml_files`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    entries: Any = None
    for override in OverridesParser.create().parse_overrides(overrides):
        if override.get_key_element() == "hydra.searchpath":
            entries = override.value()
            break
    if entries is None and foreign:
        # the primary config's own, read as Hydra reads it: from the first source holding it
        source = next((s for s in loader.get_sources() if s.is_config(config_name)), None)
        loaded = source.load_config(config_name) if source is not None else None
        if loaded is not None and OmegaConf.is_dict(loaded.config):
            entries = OmegaConf.select(loaded.config, "hydra.searchpath")
            entries = OmegaConf.to_container(entries) if OmegaConf.is_config(entries) else entries
    if entries is None:
        return []
    check_searchpath("hydra.searchpath", entries)
    return [str(e) for e in (entries if isinstance(entries, (list, tuple)) else [entries])]


def _check_defaults_stay_home(loader, config_name: str, overrides: list[str]) -> None:
    """A defaults entry names a config inside the search path's directories: `../x` or
    `/../../x` would compose a file from anywhere on the disk."""
    from hydra.types import RunMode

    for default in loader.compute_defaults_list(config_name, overrides, RunMode.RUN).defaults:
        path = default.config_path or ""
        if ".." in path.split("/"):
            raise ConfigError(
                f"the defaults entry {path!r} is refused: a config names configs inside its config directory (no '..')"
            )


_REFERENCES: dict[tuple[str, ...], dict] = {}


def _reference_hydra(choices: dict) -> dict:
    """The `hydra` node zoo's own config composes to with the same Hydra group choices (e.g.
    hydra/launcher=slurm), unresolved: what `check_hydra_section` compares against."""
    key = tuple(
        sorted(
            f"{g}={c}" for g, c in choices.items() if g in HYDRA_GROUPS and c is not None and c != HYDRA_GROUPS[g][0]
        )
    )
    if key not in _REFERENCES:
        cfg = _compose_raw(list(key), CONFIG_NAME, config_source(), ())
        _REFERENCES[key] = cast(dict, OmegaConf.to_container(cfg.hydra, resolve=False))
    return _REFERENCES[key]


def _check_hydra(cfg: DictConfig, overrides: list[str], *, reference: bool = False) -> None:
    """Hydra's section of `cfg` holds only zoo's own values and checked settings
    (`zoo.config.safety.hydra_section`); its record of the overrides is the command line's; a sweep's
    job directory lies inside the sweep directory. Composed from zoo's own config files alone,
    the section differs from zoo's own only by the command line's overrides, whose settings are
    checked where they landed (`zoo.cli.hydra_check`: no second, reference composition); with
    a config directory from elsewhere (or `reference`), it is compared with the reference."""
    given = cast(dict[str, Any], OmegaConf.to_container(cfg.hydra, resolve=False))
    if reference or not own_sources(given):
        check_hydra_section(given, _reference_hydra(given["runtime"]["choices"]))
    else:
        check_overridden_settings(given, overrides)
    recorded = list(given["overrides"]["task"]) + list(given["overrides"]["hydra"])
    if sorted(recorded) != sorted(overrides):
        raise ConfigError("hydra.overrides is refused: Hydra records the command line's overrides there")
    check_job_subdir(cfg)
