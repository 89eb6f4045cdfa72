"""`Choice`: the base of every enum in the config schemas (families, position kinds, tasks,
...). A module of its own so that schema modules which import each other's enums (the model
schema and the position-scheme table) share it without an import cycle."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, TypeVar

from zoo.config.errors import ConfigError

C = TypeVar("C", bound="Choice")


def listed(values: Iterable[Any], conjunction: str = "or") -> str:
    """The values' strings as prose: "a", "a or b", "a, b or c" (`conjunction` before the last)."""
    words = [str(v) for v in values]
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


class Choice(str, enum.Enum):
    """An enum whose members are their own names, so `Family("decoder_only")` works and a
    member compares equal to its string."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def listed(cls, conjunction: str = "or") -> str:
        """Every member's value as prose, "a, b or c": how help and refusals name a kind set,
        so that a new member is named as soon as it exists."""
        return listed(cls, conjunction)

    @classmethod
    def parse(cls: type[C], value: Any, key: str) -> C:
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value))
        except ValueError:
            allowed = ", ".join(m.value for m in cls)
            raise ConfigError(f"{key}={value!r} is not allowed; choose one of: {allowed}") from None
