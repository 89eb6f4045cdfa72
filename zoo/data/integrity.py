"""Cache entries that prove they are intact.

Every Arrow file a cached `datasets` step leaves in the cache (the converted corpus, the
split's index files, the tokenized columns) gets a sidecar `<file>.zoo-sha256` holding the
SHA-256 of its bytes, written by the run that made it. A later run checks the digest before it
trusts the file; a file that no longer matches (overwritten bytes), no longer opens (a cut
file) or has no record it did not make itself is built again from its inputs, with one line
saying which entry was damaged. A cache
that cannot be written (read-only) is read as it is: digests are checked where they exist and
nothing new is recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from zoo.data.errors import DataError

SUFFIX = ".zoo-sha256"
_CHUNK = 1 << 20
_CLOCK_MARGIN_S = 0.05
_digests: dict[tuple, str] = {}

D = TypeVar("D")


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of the file's bytes (remembered for the process while the file's size and
    modification time stay the same: the steps of one run share their files)."""
    st = os.stat(path)
    key = (os.fspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _digests:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                h.update(block)
        _digests[key] = h.hexdigest()
    return _digests[key]


def remembered_digest(path: str | os.PathLike, store: Path) -> str:
    """`file_digest(path)`, remembered across runs in the JSON file `store` under the file's
    absolute path, size, modification time and inode (as git's index does): a corpus is read
    in full once, not by every run and rank. Where `store` cannot be written, computed each time."""
    path = Path(path).resolve()
    st = path.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(str(path))
    if isinstance(entry, list) and entry[:3] == stamp and len(entry) == 4:
        return entry[3]
    digest = file_digest(path)
    known[str(path)] = stamp + [digest]
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp = store.with_name(f".{store.name}.{os.getpid()}")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, store)
    except OSError:
        pass
    return digest


def damaged(paths: Iterable[str | os.PathLike], made_since: float) -> list[Path]:
    """The files among `paths` whose recorded digest differs from their bytes, or that have no
    record and were not made since `made_since` (a time.time()): a file is never blessed on
    first use. A file made since then (by the step that is reading it) gets its record now."""
    bad = []
    for path in map(Path, paths):
        record = path.with_name(path.name + SUFFIX)
        digest = file_digest(path)
        try:
            expected = record.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            # ctime: set by the kernel at every change, so a planted file cannot claim to be new
            # (less a margin for the kernel's coarse clock, which can lag time.time())
            if os.stat(path).st_ctime >= made_since - _CLOCK_MARGIN_S:
                _record(record, digest)
            else:
                bad.append(path)
            continue
        except (OSError, UnicodeDecodeError):
            expected = ""
        if expected != digest:
            bad.append(path)
    return bad


def restamp(paths: Iterable[str | os.PathLike]) -> None:
    """Record the current digest of each file (after rebuilding it)."""
    for path in map(Path, paths):
        _record(path.with_name(path.name + SUFFIX), file_digest(path))


def cache_files(ds) -> list[str]:
    """The Arrow files a `datasets.Dataset` reads (data and index mapping); none when it lives
    in memory."""
    return [entry["filename"] for entry in getattr(ds, "cache_files", []) or []]


def checked(step: Callable[[bool], D], what: str, files: Callable[[D], list[str]] = cache_files) -> D:
    """`step(fresh)` with its cache verified: `step(False)` may reuse cached files; when one of
    them cannot be read or no longer matches its digest, `step(True)` builds them again and
    their new digests are recorded, and one line says so. A failure of the fresh build (the
    inputs themselves are at fault) is the caller's to report."""
    start = time.time()
    try:
        result = step(False)
    except (OSError, ValueError) as exc:  # pyarrow: a cut file is OSError / ArrowInvalid
        result = step(True)  # raises again when the inputs themselves are at fault
        restamp(files(result))
        notice(f"a cached file of {what} could not be read ({first_line(exc)}); built it again")
        return result
    bad = damaged(files(result), made_since=start)
    if not bad:
        return result
    recorded = bad[0].with_name(bad[0].name + SUFFIX).exists()
    result = step(True)
    restamp(files(result))
    notice(
        f"cache entry {bad[0]} of {what} "
        + ("did not match the digest recorded when it was written" if recorded else "has no digest record")
        + "; built it again"
    )
    return result


def discard(entry: Path, what: str, cache_key: str) -> None:
    """Remove a damaged cache entry (a directory): moved aside first, so a reader never sees it
    half deleted. DataError naming it and `cache_key` when it cannot be removed."""
    import shutil

    aside = entry.with_name(f".{entry.name}-damaged-{os.getpid()}")
    try:
        os.replace(entry, aside)
    except OSError as exc:
        raise DataError(
            f"{what} {entry} is damaged and cannot be removed ({exc.strerror}); delete it, "
            f"or point {cache_key} elsewhere"
        ) from None
    if aside.is_symlink():  # a link planted at the entry's name: the link goes, not what it points at
        aside.unlink()
    else:
        shutil.rmtree(aside, ignore_errors=True)


def notice(message: str) -> None:
    print(f"zoo: {message}", file=sys.stderr, flush=True)


def _record(record: Path, digest: str) -> None:
    try:
        tmp = record.with_name(f".{record.name}.{os.getpid()}")
        tmp.write_text(digest + "\n", encoding="ascii")
        os.replace(tmp, record)
    except OSError:
        pass  # a read-only cache: the entry is read as it is


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, whitespace collapsed (its type when empty)."""
    text = str(exc).strip()
    return " ".join(text.splitlines()[0].split()) if text else type(exc).__name__


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename inside directory `path` durable (best effort: not every file system can)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
