"""Configs are data: what a config may ask Python to build is limited to an allow-list.

Hydra builds objects named in configs: `_target_` keys (launchers, sweepers, Hydra callbacks, and
any run wiring), and `class` / `()` keys of the logging configuration. A config file from
elsewhere could name `os.system` or `builtins.eval` there. `check_config_targets` finds every
such name in a composed config and refuses it unless

1. the dotted name is one of the allow-list: the `_target_` of each sweeper, sampler and
   launcher option `zoo.config.safety.plugins` admits, read from Hydra's ConfigStore where its
   package stores it, and a few logging and optimizer classes; and
2. the object it resolves to is defined in the module it names: a name through a module's
   import of `os` (`PACKAGE.MODULE.os.system`) resolves to a function of `posix`, and is
   refused.

`instantiate` is the one way zoo itself builds an object from a config node.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, ValueNode

from zoo.config.errors import ConfigError
from zoo.config.safety.environment import check_env_reads, check_env_set
from zoo.config.safety.plugins import SHIPPED

# the objects a config may name besides the admitted plugins' own, each by its exact dotted name
OWN_TARGETS = (
    "logging.StreamHandler",  # handlers and formatters of Hydra's logging configuration
    "logging.FileHandler",
    "logging.Formatter",
    "torch.optim.SGD",
    "torch.optim.Adam",
    "torch.optim.AdamW",
)
EXACT = ("sys.stdout", "sys.stderr")  # ext:// streams of the logging configuration
# a file a logging handler writes lies in the run directory
LOG_FILE_PREFIXES = ("${hydra.runtime.output_dir}/", "${hydra:runtime.output_dir}/")
TARGET_KEYS = ("_target_",)
LOGGING_KEYS = ("class", "()")
LOGGING_SECTIONS = ("hydra.job_logging", "hydra.hydra_logging")


@functools.cache
def plugin_targets() -> tuple[str, ...]:
    """The `_target_` of every sweeper, sampler and launcher option the plugin table admits
    (`zoo.config.safety.plugins.SHIPPED`), as the package the table names stores it in Hydra's
    ConfigStore; an option whose package is not installed names nothing."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigLoadError

    Plugins.instance()  # the installed plugins store their options when Hydra discovers them
    store, targets = ConfigStore.instance(), []
    for group, options in SHIPPED.items():
        for option, provider in options.items():
            try:  # zoo's own options (conf/hydra/) build on a shipped option's target
                entry = store.load(f"{group}/{option}.yaml")
            except ConfigLoadError:
                continue
            target = OmegaConf.select(entry.node, "_target_", default=None)
            if entry.provider == provider and isinstance(target, str) and target not in targets:
                targets.append(target)
    return tuple(targets)


def allowed_targets() -> tuple[str, ...]:
    """Every dotted name a config may name in a `_target_`."""
    return plugin_targets() + OWN_TARGETS


def resolve_target(name: str, key: str = "_target_") -> Any:
    """The object `name` denotes, if the allow-list names it; ConfigError otherwise."""
    allowed = allowed_targets()
    if not isinstance(name, str) or name not in allowed + EXACT:
        raise ConfigError(f"{key}={name!r} is refused: configs may only name {', '.join(allowed)}")
    obj = _import(name, key)
    if name in EXACT:
        return obj
    module = getattr(obj, "__module__", None) or ""
    home = name.rsplit(".", 1)[0]
    if not (module == home or module.startswith(home + ".") or home.startswith(module)):
        raise ConfigError(f"{key}={name!r} is refused: it resolves to {module}.{getattr(obj, '__qualname__', '')}")
    return obj


def _import(name: str, key: str) -> Any:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            raise ConfigError(f"{key}={name!r}: no such object") from None
        return obj
    raise ConfigError(f"{key}={name!r}: no such module")


def find_targets(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(key path, key, value) of every `_target_` in `node`, of every `class` / `()` and every
    `ext://` value in the logging sections, values resolved where they are interpolations;
    containers that an interpolation creates (`${oc.create:...}`) are searched too."""
    get: Callable[[Any], Any]
    items: list[tuple[Any, str]]  # (key or index, its path)
    if isinstance(node, DictConfig):
        items = [(key, f"{path}.{key!s}" if path else str(key)) for key in node.keys()]
        get = node._get_node
    elif isinstance(node, ListConfig):
        items = [(i, f"{path}[{i}]") for i in range(len(node))]
        get = node._get_node
    else:
        return
    for key, sub in items:
        logging = any(sub.startswith(s + ".") for s in LOGGING_SECTIONS)
        if isinstance(node, DictConfig) and (key in TARGET_KEYS or (logging and key in LOGGING_KEYS)):
            yield sub, str(key), _value(node, key)
            continue
        child = get(key)
        if isinstance(child, (DictConfig, ListConfig)):
            yield from find_targets(child, sub)
            continue
        value = _value(node, key)
        if isinstance(value, (DictConfig, ListConfig, dict, list)):
            yield from find_targets(OmegaConf.create(value) if isinstance(value, (dict, list)) else value, sub)
        elif logging and isinstance(value, str) and value.startswith("ext://"):
            yield sub, "ext://", value


def _value(node, key) -> Any:
    """The value at `key`, resolved where that is possible here. A plain value is read as it
    is (nothing to resolve: most of a config, so the walk stays cheap)."""
    child = node._get_node(key)
    if isinstance(child, ValueNode) and not child._is_interpolation():
        return child._value()
    try:
        return node[key]
    except Exception:  # e.g. needs Hydra's run-time resolvers: checked as written
        return child._value()  # the interpolation's text, as to_container(resolve=False) gives it


def check_config_targets(cfg: DictConfig) -> None:
    """ConfigError for the first object name in `cfg` outside the allow-list, a log file outside
    the run directory, an environment variable the job may not set, or a value read from the
    environment, however it is spelled (`zoo.config.safety.environment`)."""
    for path, key, value in find_targets(cfg):
        if key == "()" and not isinstance(value, str):
            raise ConfigError(f"{path}: a logging factory must be a dotted name, got {value!r}")
        if isinstance(value, str) and value.startswith("ext://"):
            value = value[len("ext://") :]
        resolve_target(value, key=path)
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(raw, dict)  # a DictConfig's container
    _check_log_files(raw.get("hydra", {}))
    check_env_set(((raw.get("hydra") or {}).get("job") or {}).get("env_set"))
    check_env_reads({k: v for k, v in raw.items() if k != "hydra"})  # the run's own keys named first
    check_env_reads({"hydra": raw.get("hydra")})


def _check_log_files(hydra: dict) -> None:
    for section in ("job_logging", "hydra_logging"):
        handlers = (hydra.get(section) or {}).get("handlers") or {}
        for name, handler in handlers.items():
            filename = handler.get("filename") if isinstance(handler, dict) else None
            if filename is None:
                continue
            text = str(filename)
            if not text.startswith(LOG_FILE_PREFIXES) or ".." in text:
                raise ConfigError(
                    f"hydra.{section}.handlers.{name}.filename={text!r} is refused: a log file "
                    f"lies in the run directory (${{hydra.runtime.output_dir}}/NAME)"
                )


def instantiate(node: Any, **kwargs: Any) -> Any:
    """hydra.utils.instantiate, after checking every name in `node` against the allow-list."""
    from hydra.utils import instantiate as hydra_instantiate

    node = node if isinstance(node, (DictConfig, ListConfig)) else OmegaConf.create(node)
    check_config_targets(node)
    return hydra_instantiate(node, **kwargs)
