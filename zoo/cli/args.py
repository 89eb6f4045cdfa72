"""`key=value` command lines checked against a dataclass schema (for the inference tools,
which need no run directory and no Hydra job)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from zoo.config.errors import ConfigError, explain

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def parse(schema: type[T], argv: list[str], *, passthrough: tuple[str, ...] = ()) -> tuple[T, list[str]]:
    """Split `argv` into the schema's keys (validated, typed) and the `passthrough` prefixes
    (e.g. "data." keys, returned as dotlist strings). Raises ConfigError in one line, also for a
    value that reads the environment (`zoo.config.safety.environment`)."""
    from zoo.config.safety.environment import check_env_reads

    own: list[str] = []
    rest: list[str] = []
    for arg in argv:
        if "=" not in arg:
            allowed = ", ".join(f.name for f in fields(schema))
            raise ConfigError(f"arguments are key=value pairs, got {arg!r}; keys: {allowed}")
        key = arg.split("=", 1)[0]
        (rest if any(key.startswith(p) for p in passthrough) else own).append(arg)
    own = [_integral(schema, arg) for arg in own]
    text = _unparsed_text(schema, own)
    own = [arg for arg in own if arg.split("=", 1)[0] not in text]
    try:
        given = OmegaConf.from_dotlist(own)
        check_env_reads(OmegaConf.to_container(given, resolve=False))
        check_env_reads(OmegaConf.to_container(OmegaConf.from_dotlist(rest), resolve=False))
        merged = OmegaConf.merge(OmegaConf.structured(schema), given)
        # a structured (dataclass) config always reads back as a mapping of its field names
        data = cast(dict[str, Any], OmegaConf.to_container(merged, resolve=True, enum_to_str=True))
    except OmegaConfBaseException as exc:
        message, bad = explain(exc), getattr(exc, "full_key", None)
        kind = _field_types(schema).get(str(bad))
        if kind in (int, float, bool) and ("could not be converted" in message or "not a valid" in message):
            value = next((a.split("=", 1)[1] for a in own if a.split("=", 1)[0] == bad), "")
            words = {int: "an integer", float: "a number", bool: "true or false"}
            raise ConfigError(f"{bad}={value}: give {words[kind]}") from None
        raise ConfigError(message if not bad or bad in message else f"{bad}: {message}") from None
    data.update(text)
    return schema(**data), rest


def _unparsed_text(schema: type, argv: list[str]) -> dict[str, str]:
    """The values YAML cannot read (a tab, an escape or another control character in a prompt)
    of the schema's text fields, kept as the text given; the same in a field of another type is
    refused on one line."""
    import yaml

    kept = {}
    for arg in argv:
        key, _, value = arg.partition("=")
        try:
            OmegaConf.from_dotlist([arg])
        except yaml.YAMLError as exc:
            if _field_types(schema).get(key) is str:
                kept[key] = value
            else:
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                raise ConfigError(f"{key}={value!r}: not a value ({problem})") from None
        except OmegaConfBaseException:
            pass  # reported with the others below
    return kept


def _field_types(schema: type) -> dict[str, type]:
    """Each field's type, Optional[X] (or X | None) read as X."""
    import types
    import typing

    found = {}
    for name, hint in typing.get_type_hints(schema).items():
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        found[name] = args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1 else hint
    return found


def _integral(schema: type, arg: str) -> str:
    """KEY=1e9 for an integer field, written as KEY=1000000000 (OmegaConf reads 1e9 as a float
    and refuses it); any other value is left as given."""
    key, _, value = arg.partition("=")
    if _field_types(schema).get(key) is int:
        try:
            number = float(value)
        except ValueError:
            return arg
        if number.is_integer() and abs(number) < 2**63:
            return f"{key}={int(number)}"
    return arg


def not_a_file(path: Path) -> str:
    """What a path given for an input file is instead ("no such file" said of a directory misled)."""
    if path.is_dir():
        return "is a directory"
    if path.exists() or path.is_symlink():
        return "is not a regular file" if path.exists() else "is a link to nothing"
    return "no such file"
