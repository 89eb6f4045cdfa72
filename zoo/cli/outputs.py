"""The `out=` a tool writes at its end, checked at its start: a file named by a directory, or a
place nothing can be written (a read-only or virtual file system), is refused on one line
before minutes of work, not with a traceback after them."""

from __future__ import annotations

import tempfile
from pathlib import Path

from zoo.config.errors import ConfigError


def writable_place(key: str, value: str, target: Path) -> None:
    """The nearest existing directory above `target` takes a new file (tried, not guessed:
    permissions do not tell about a read-only mount or /proc); the directories below it are
    made when the tool writes."""
    above = target.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise ConfigError(f"{key}={value}: {above} is a file, not a directory")
    try:
        with tempfile.TemporaryFile(dir=above):
            pass
    except OSError as exc:
        raise ConfigError(
            f"{key}={value}: nothing can be written in {above} ({exc.strerror or exc}); give a writable place"
        ) from None


def check_out_file(key: str, value: str | None, example: str = "result.json") -> None:
    """`out=FILE`: not a directory, and in a writable place."""
    if value is None:
        return
    target = Path(value)
    if target.is_dir():
        raise ConfigError(
            f"{key}={value} is a directory; {key}= names the file to write, e.g. {key}={target / example}"
        )
    writable_place(key, value, target)


def check_out_dir(key: str, value: str) -> None:
    """`out=DIR` (a directory to make): in a writable place."""
    target = Path(value)
    if not target.exists():
        writable_place(key, value, target)
