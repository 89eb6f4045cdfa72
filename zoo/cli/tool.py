"""The one front door of every console script: `--help` written from the argument schemas' help
metadata, and a `ZooError`, and only a ZooError, turned into one line on stderr and exit status 2.
Any other exception is a bug in zoo and keeps its traceback."""

from __future__ import annotations

import dataclasses
import enum
import signal
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from zoo.config.errors import ZooError
from zoo.training.signals.forks import parent_only

HELP_FLAGS = ("-h", "--help")
WIDTH = 100


def fail(tool: str, message: str, status: int = 2) -> NoReturn:
    """`TOOL: error: MESSAGE` on stderr, the message folded onto one line, and exit `status`."""
    line = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"{tool}: error: {line}", file=sys.stderr)
    sys.exit(status)


def wants_help(argv: Sequence[str]) -> bool:
    return any(arg in HELP_FLAGS for arg in argv)


def serve(
    tool: str, body: Callable[[list[str]], Any], help: Callable[[], str], argv: Sequence[str] | None = None
) -> None:
    """Run a console script: print `help()` for -h / --help (exit 0), otherwise `body(argv)`;
    a ZooError from either ends the command with one line and exit status 2 (1 for one whose
    `exit_status` says the machine's environment is at fault)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = _take_sigterm()
    try:
        if wants_help(argv):
            print(help())
        else:
            body(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not in the interpreter's exit
    except ZooError as exc:
        fail(tool, str(exc), getattr(exc, "exit_status", 2))
    except (KeyboardInterrupt, Terminated) as exc:  # what was finished is kept (zoo-prepare's shards)
        signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
        print(f"{tool}: stopped by {signal.Signals(signum).name}", file=sys.stderr)
        sys.exit(128 + signum)
    except BrokenPipeError:  # `zoo-... | head`: the reader has gone; end quietly, as Python's docs advise
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush at exit goes nowhere
        sys.exit(1)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class Terminated(BaseException):
    """SIGTERM reached a tool: it ends like Ctrl-C, with one line and exit status 143."""


@parent_only  # a pool's worker ends quietly when the pool ends it
def _terminated(signum, frame) -> NoReturn:
    raise Terminated


def _take_sigterm():
    """SIGTERM raises Terminated in the main thread (the default would end the process without a
    word and skip the clean-up of worker pools); the handler it replaced, or None."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminated)


@dataclasses.dataclass(frozen=True)
class Section:
    """A schema whose keys a tool takes, under a heading; `prefix` is prepended to each key
    (e.g. "data." for a section given as data.KEY=VALUE); `values` replaces the schema's
    defaults with the values in force (e.g. a composed config's); `keys` keeps only those."""

    title: str
    schema: type
    prefix: str = ""
    values: dict | None = None
    keys: tuple[str, ...] | None = None


def help_text(usage: str, description: str, sections: Sequence[Section], notes: Sequence[str] = ()) -> str:
    """A tool's --help: its usage line, its description, then every key of every section with
    its default, its type (or choices) and the help text of the field's metadata."""
    parts = [f"usage: {usage}", "", textwrap.dedent(description).strip()]
    for section in sections:
        lines = describe(section.schema, section.prefix, section.values, section.keys)
        parts += ["", *wrap(f"{section.title}:", indent="  "), *lines]
    if notes:
        parts.append("")
        for note in notes:
            parts += wrap(note, indent="      ") or [""]
    return "\n".join(parts)


def describe(
    schema: type, prefix: str = "", values: dict | None = None, keys: Sequence[str] | None = None
) -> list[str]:
    """Two lines a key: `KEY=DEFAULT  [TYPE]`, then its help (when the field has one); a nested
    dataclass's keys follow as KEY.NAME, and so do a mapping's when `values` gives them."""
    lines: list[str] = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if keys is not None and f.name not in keys:
            continue
        kind = hints.get(f.name, f.type)
        given = values.get(f.name, dataclasses.MISSING) if values is not None else dataclasses.MISSING
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            lines += describe(kind, f"{prefix}{f.name}.", given if isinstance(given, dict) else None)
            continue
        text = f.metadata.get("help")
        if isinstance(given, dict) and given and typing.get_origin(kind) is dict:
            lines += [f"  {prefix}{f.name}.{k}={show(v)}" for k, v in given.items()]
        else:
            value = given if given is not dataclasses.MISSING else default_of(f)
            lines.append(f"  {prefix}{f.name}={show(value)}  [{type_name(kind)}]")
        if text:
            lines += wrap(text, first=" " * 6, indent=" " * 6)
    return lines


def wrap(text: str, first: str = "", indent: str = "") -> list[str]:
    """Lines of at most WIDTH characters, never broken inside a word, a path or a hyphenated name."""
    return textwrap.wrap(
        text, WIDTH, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
    )


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def show(value: Any) -> str:
    """A value as it is written on the command line."""
    if value is dataclasses.MISSING or value == "???":
        return "???"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and value == "":
        return "''"
    return str(value)


def type_name(kind: Any) -> str:
    """`int`, `int or null`, `greedy | beam | sample`, `list of float`, ..."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):  # Optional[X] and X | None
        named = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(named) + (" or null" if type(None) in args else "")
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return " | ".join(str(m.value) for m in kind)
    if origin in (list, tuple):
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if kind is Any:
        return "any"
    return getattr(kind, "__name__", str(kind))
