"""zoo's check of the `hydra:` section of one composition, without composing again: whether the
config came from zoo's own files alone, each setting the command line overrides checked where
it landed, and a sweep's first job directory inside the sweep directory.

A composition from zoo's own config tree (conf/, recipes/ and Hydra's and its plugins' own
configs, nothing from `-cd`, `-cp` or `hydra.searchpath`) has zoo's own `hydra:` section except
where an override of the command line changed it (every file of that tree is held to zoo's own
section by tests/cli/test_hydra_check.py). So its check needs no reference composition: the
overridden keys are settings (`check_hydra_overrides`, before Hydra reads them), and their
values are checked here by the same rules (`zoo.config.safety.hydra_section.HYDRA_KEYS`). A
config from elsewhere is compared leaf by leaf with zoo's own (`zoo.compose`'s reference)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from zoo.config.errors import ConfigError, explain, zoo_error_in
from zoo.config.paths import config_source, packaged_or_checkout
from zoo.config.safety.hydra_section import (
    SUBDIR,
    check_group_choices,
    job_subdir,
    leaves,
    setting_check,
)

# Hydra's own configs and the structured configs (zoo's schemas, the plugins' launchers and
# sweepers) that every composition's search path holds beside zoo's conf/ and recipes/
HYDRAS_OWN = ("pkg://hydra.conf", "structured://")


def _as_url(directory: str) -> str:
    return directory if directory.startswith(("pkg://", "file://")) else f"file://{directory}"


def own_sources(given: Mapping[str, Any]) -> bool:
    """Whether every config source of the composition (`hydra.runtime.config_sources`) is zoo's
    own: its conf/ as the primary tree, its recipes/, and Hydra's own."""
    recipes = packaged_or_checkout("zoo.recipes", "recipes")
    own = {*HYDRAS_OWN, _as_url(config_source()), *([_as_url(recipes)] if recipes else [])}
    sources = (given.get("runtime") or {}).get("config_sources") or []
    return bool(sources) and all(f"{s['schema']}://{s['path']}" in own for s in sources)


def check_overridden_settings(given: Mapping[str, Any], overrides: Iterable[str]) -> None:
    """The Hydra group choices, and every leaf of `given` (the composed `hydra` node, plain and
    unresolved) at or below a key the command line overrides, checked by its setting's rule: the
    check `check_hydra_section` makes of a key that differs from zoo's own."""
    check_group_choices((given.get("runtime") or {}).get("choices") or {})
    found = leaves(given)
    for override in overrides:
        key = override.partition("=")[0]
        if key.startswith("~") or not key.lstrip("+").startswith("hydra."):
            continue  # a deletion leaves nothing to check; hydra/GROUP choices are checked above
        key = key.lstrip("+")
        for path, value in found.items():
            if path == key or path.startswith(f"{key}."):
                check = setting_check(path)
                if check is not None:
                    check(path, value)


def check_job_subdir(cfg: DictConfig) -> None:
    """The first job's directory of a sweep, `hydra.sweep.subdir` resolved as Hydra resolves it
    for that job (against the whole config: `${x}` may read any key), lies inside the sweep
    directory (`zoo.config.safety.hydra_section.job_subdir`). A value only Hydra's job knows
    (`${hydra:...}`) is checked where each job's directory is made (`subdir_override`)."""
    from omegaconf.errors import InterpolationKeyError, InterpolationResolutionError, OmegaConfBaseException

    written = cast(dict, OmegaConf.to_container(cfg.hydra.sweep, resolve=False)).get("subdir")
    if written == "${hydra.job.num}" or (isinstance(written, str) and "${" not in written):
        # the default, or a plain name: resolved without copying the whole config (most commands)
        job_subdir("0" if written == "${hydra.job.num}" else written, written)
        return
    probe = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    probe.hydra.job.num, probe.hydra.job.id = 0, "0"  # as Hydra numbers the first job
    try:
        resolved = OmegaConf.select(probe, SUBDIR, throw_on_missing=True)
    except InterpolationKeyError as exc:  # names a key no config has: Hydra would stop the sweep
        raise ConfigError(f"{SUBDIR}={written!r}: {explain(exc)}") from None
    except InterpolationResolutionError as exc:
        refusal = zoo_error_in(exc)
        if refusal is not None:  # zoo's own check, met again (a rank's command line holds it)
            raise refusal from None
        first: BaseException = exc
        while first.__context__ is not None:  # where it began: OmegaConf's own error, or a resolver's
            first = first.__context__
        if isinstance(first, OmegaConfBaseException):  # e.g. a key read inside a value
            raise ConfigError(f"{SUBDIR}={written!r}: {explain(exc)}") from None
        return  # a resolver that needs what only Hydra's job knows (${hydra:...})
    except Exception:  # noqa: BLE001 - needs run-time values: the written form was checked
        return
    job_subdir(resolved, None if written is None else str(written))
