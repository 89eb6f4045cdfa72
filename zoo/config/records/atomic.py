"""Records written whole or not at all: the text goes to a new file of an unpredictable name
beside the target (created exclusively, so a planted file or link there is never written
through), is flushed to disk, and replaces the target in one rename. A reader sees the old
record or the new one, never a part; a kill during the write leaves the old record and a
stray `.NAME.*.tmp` file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from zoo.config.records.links import check_name


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, binary: bool = False) -> Iterator:
    """`with replacing(path) as f: f.write(...)`: `path` is replaced by what was written when the
    block ends without an error; on an error the temporary file is removed and `path` kept."""
    target = Path(path)
    check_name(target)  # zoo.config.records.links: one link check for every tool
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """`path` holds `text`, written whole or not at all."""
    with replacing(path) as handle:
        handle.write(text)
    return Path(path)


def umask() -> int:
    """The process's umask, read without changing it (Linux); 0o022 where it cannot be read."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
