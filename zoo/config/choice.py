"""`Choice`: the base of every enum in the config schemas (families, position kinds, tasks,
...). A module of its own so that schema modules which import each other's enums (the model
schema and the position-scheme table) share it without an import cycle."""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from zoo.config.errors import ConfigError

C = TypeVar("C", bound="Choice")


class Choice(str, enum.Enum):
    """An enum whose members are their own names, so `Family("decoder_only")` works and a
    member compares equal to its string."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls: type[C], value: Any, key: str) -> C:
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value))
        except ValueError:
            allowed = ", ".join(m.value for m in cls)
            raise ConfigError(f"{key}={value!r} is not allowed; choose one of: {allowed}") from None
