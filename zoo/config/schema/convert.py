"""Turn whatever a user holds (Hydra DictConfig, plain dict, dataclass) into a validated
schema object, and schema objects back into plain data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.schema.frozen import thawed
from zoo.config.schema.model import ModelConfig, PositionConfig


def as_model_config(cfg: Any) -> ModelConfig:
    """Validate `cfg` and return a `ModelConfig` with derived values filled in.

    Raises `ConfigError` with a one-line message for unknown keys, bad values and impossible
    combinations.
    """
    if isinstance(cfg, ModelConfig):
        return ModelConfig(**cfg.to_dict())
    data = to_plain(cfg)
    if not isinstance(data, Mapping):
        raise ConfigError(f"a model config must be a mapping, got {type(cfg).__name__}")
    data = dict(data)
    _reject_unknown(data, ModelConfig, "model")
    reject_non_finite(data, "model")
    position = data.get("position", {})
    if isinstance(position, Mapping):
        _reject_unknown(position, PositionConfig, "model.position")
        data["position"] = PositionConfig(**position)
    return ModelConfig(**data)


def as_schema(cfg: Any, schema: type, prefix: str):
    """Validate a composed node, a mapping or an instance against the dataclass `schema`:
    None gives the defaults; unknown keys, values left ??? and a schema's own checks raise
    `ConfigError` naming `prefix.key`."""
    if cfg is None:
        return schema()
    if isinstance(cfg, schema):
        return schema(**plain(cfg))
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    if isinstance(cfg, DictConfig):
        try:
            cfg = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True, throw_on_missing=True)
        except MissingMandatoryValue as exc:
            key = getattr(exc, "full_key", None) or "a key"
            raise ConfigError(f"{prefix}.{key} must be set (it is ??? in the config)") from None
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"{prefix} must be a mapping, got {type(cfg).__name__}")
    _reject_unknown(cfg, schema, prefix)
    reject_non_finite(cfg, prefix)
    return schema(**cfg)


def plain(obj: Any) -> dict:
    """A flat schema object as plain data (enums as their strings, tuples as lists, frozen
    mappings as dicts)."""
    return {
        f.name: (
            getattr(obj, f.name).value if isinstance(getattr(obj, f.name), Choice) else thawed(getattr(obj, f.name))
        )
        for f in fields(obj)
    }


def to_plain(cfg: Any) -> Any:
    """A composed DictConfig as plain data (resolved, enums as strings); anything else as is."""
    try:
        from omegaconf import DictConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        return cfg
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    return cfg


SEED_MAX = 2**32 - 1  # what NumPy's and Lightning's seeding accept (torch's takes more)


def check_seed(seed: object, key: str) -> None:
    """A seed every library zoo seeds takes (`seed=-1` reached Lightning's seed_everything and
    ended the run with its ValueError's traceback; a seed past 2**64 overflowed torch's)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"{key} must be an integer from 0 to {SEED_MAX}, got {seed!r}")


def reject_non_finite(data: Any, prefix: str) -> None:
    """No setting is NaN or infinite (`optim.lr=nan` passes `lr <= 0` checks and reaches torch):
    ConfigError naming the key."""
    import math

    if isinstance(data, float) and not math.isfinite(data):
        raise ConfigError(f"{prefix} must be a finite number, got {data}")
    if isinstance(data, Mapping):
        for key, value in data.items():
            reject_non_finite(value, f"{prefix}.{key}")
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            reject_non_finite(value, f"{prefix}[{i}]")


def _reject_unknown(data: Mapping, schema: type, prefix: str) -> None:
    allowed = [f.name for f in fields(schema)]
    for key in data:
        if key not in allowed:
            raise ConfigError(f"unknown key {prefix}.{key}; allowed keys: {', '.join(allowed)}")
