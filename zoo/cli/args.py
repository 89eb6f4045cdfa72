"""`key=value` command lines checked against a dataclass schema (for the inference tools,
which need no run directory and no Hydra job)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from zoo.config.errors import ConfigError, explain

T = TypeVar("T")


def parse(schema: type[T], argv: list[str], *, passthrough: tuple[str, ...] = ()) -> tuple[T, list[str]]:
    """Split `argv` into the schema's keys (validated, typed) and the `passthrough` prefixes
    (e.g. "data." keys, returned as dotlist strings). Raises ConfigError in one line."""
    own, rest = [], []
    for arg in argv:
        if "=" not in arg:
            allowed = ", ".join(f.name for f in fields(schema))
            raise ConfigError(f"arguments are key=value pairs, got {arg!r}; keys: {allowed}")
        key = arg.split("=", 1)[0]
        (rest if any(key.startswith(p) for p in passthrough) else own).append(arg)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.from_dotlist(own))
        data: dict[str, Any] = OmegaConf.to_container(merged, resolve=True, enum_to_str=True)
    except OmegaConfBaseException as exc:
        message, key = explain(exc), getattr(exc, "full_key", None)
        raise ConfigError(message if not key or key in message else f"{key}: {message}") from None
    return schema(**data), rest
