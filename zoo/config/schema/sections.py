"""The top-level sections of zoo's config are the fields of `ZooConfig`, no more and no fewer.

A section zoo does not know (`+foo.bar=1`, or a `-cd` config's own `foo:`) would be recorded in
config.yaml and every checkpoint and read by nothing: a typo of a section name trains a run of
another config than the one meant, without a word. A deleted section (`~task`) leaves `task: ???`
in the composition, which the schema then fills with its defaults: the record says `???` and the
run trains whatever the defaults are. Both are refused on one line, before anything is written:
the overrides before Hydra reads them (`check_deletions`), the composed config before it is
validated or written (`check_sections`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.schema.root import MISSING, ZooConfig

SECTIONS: tuple[str, ...] = tuple(f.name for f in fields(ZooConfig))
VALUES = ("seed", "ckpt_path", "init_from", "branch_from")  # the sections that are one value, not a mapping
HYDRA = "hydra"  # Hydra's own section, kept in a composition made with return_hydra_config


def _listed() -> str:
    return ", ".join(SECTIONS)


def check_deletions(overrides: Iterable[str]) -> None:
    """ConfigError for an override that deletes a whole top-level section (`~task`,
    `~trainer=cpu`): a section is set, never removed. Deleting a key inside one
    (`~data.val_path`) is left to Hydra and the section's schema."""
    for word in overrides:
        if not isinstance(word, str) or not word.startswith("~"):
            continue
        key = word[1:].split("=", 1)[0].split("@", 1)[0].strip()
        if key in SECTIONS:
            instead = f"{key}=VALUE" if key in VALUES else f"{key}.KEY=VALUE, or {key}=OPTION for a group"
            raise ConfigError(
                f"{word}: the top-level section {key} cannot be deleted (a run needs every "
                f"section: {_listed()}); set it instead ({instead})"
            )


def check_sections(cfg: Any) -> None:
    """ConfigError for a top-level key of the composed `cfg` that is not one of zoo's sections,
    or for a section that is still `???` (deleted, or left out of a `-cd` config's defaults)."""
    if not hasattr(cfg, "keys"):
        return  # validate() says what a non-mapping is
    keys = list(cfg.keys())  # (`in` on a DictConfig is False for a ??? value)
    unknown = [str(k) for k in keys if k not in SECTIONS and k != HYDRA]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], SECTIONS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(
            f"{unknown[0]} is not a section of zoo's config: {hint}the sections are {_listed()} "
            f"(a section added with +{unknown[0]}... would be recorded and read by nothing)"
        )
    for name in SECTIONS:
        if name in keys and _missing(cfg, name):
            raise ConfigError(
                f"{name} is ??? (the section was deleted, e.g. with ~{name}, or a config's "
                f"defaults list leaves it out): a run needs every section ({_listed()})"
            )


def _missing(cfg: Any, name: str) -> bool:
    """Whether `cfg[name]` is OmegaConf's mark of a value to be set (a DictConfig is asked
    without resolving; a plain mapping holds the mark as a string)."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(cfg):
            return OmegaConf.is_missing(cfg, name)
    except ImportError:  # pragma: no cover - omegaconf comes with hydra
        pass
    return cfg.get(name) == MISSING
