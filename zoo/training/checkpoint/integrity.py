"""A checkpoint is checked whole before anything reads it: a damaged one is refused on one line.

torch's reader does not compare a zip member's bytes with the CRC-32 its writer recorded, so a
checkpoint with flipped bits (bit rot, a bad copy, a disk error) used to load without a word
and evaluate to NaN with exit status 0, or resume a run from weights it never had. Here:

- a checkpoint file (`torch.save`'s zip) has the CRC-32 of every member compared with its bytes
  (`zipfile.ZipFile.testzip`), the way `unzip -t` does;
- a sharded checkpoint directory (trainer=fsdp) carries `zoo-digests.json`, written by rank 0
  once every rank's shard is on disk and before the directory takes its name: the size and
  SHA-256 of each of its files (the shards and `.metadata` have no checksum of their own).
  Each file is compared with it, and `meta.pt` (a torch zip) gets the CRC check too. A directory
  written before the record existed has only `meta.pt` checked.

A file that is not a zip at all (cut short, or torch's legacy format) is left to `torch.load`,
which says so. A checkpoint that passed is remembered for the process by its size, modification
time and inode, so the several reads of one resume check it once.

The checks above can be switched off by the file itself: a zip whose CRC-32s are all zero (what
`torch.serialization.set_crc32_options(False)` writes) has nothing to compare, nor a directory
without `zoo-digests.json`. So every checkpoint zoo writes says, inside it, which checks it was
written for (`RECORD`: the CRC-32s of its zip, and for a sharded directory its digests file);
`require_record` refuses one that says so but whose CRCs are zero or whose digests file is
gone. A checkpoint without the record (written before it existed, or by another program) is
checked as far as it can be, as before."""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

from zoo.config.errors import CheckpointError
from zoo.config.records.rundir import SHARDED_META as META
from zoo.data.integrity import file_digest

DIGESTS = "zoo-digests.json"  # in a sharded checkpoint directory: {file name: {"size", "sha256"}}
RECORD = "zoo_integrity"  # in the checkpoint's dict: the checks it was written for
CRC32 = "crc32"  # every member of its zip (a sharded directory's meta.pt) has its CRC-32
# the checks a checkpoint could not have: what `check_checkpoint` returns, `require_record` reads
Unchecked = frozenset
_checked: dict[tuple, Unchecked] = {}


def check_checkpoint(path: str | os.PathLike) -> Unchecked:
    """CheckpointError (one line) when the checkpoint file or sharded directory at `path` no
    longer holds the bytes it was written with. Returns the checks it has nothing for (`CRC32`:
    its CRCs are all zero; `DIGESTS`: a directory without its record), for `require_record`."""
    path = Path(path)
    key = _stamp(path)
    if key not in _checked:
        _checked[key] = _check_directory(path) if path.is_dir() else _check_zip(path, path)
    return _checked[key]


def with_record(checkpoint: dict, *, sharded: bool = False) -> dict:
    """`checkpoint` (not changed) with `RECORD`: the checks its reader must be able to make.
    CRC-32s are promised only when torch writes them."""
    import torch

    record = {CRC32: bool(torch.serialization.get_crc32_options())}
    if sharded:
        record[DIGESTS] = True
    return {**checkpoint, RECORD: record}


def require_record(path: str | os.PathLike, data: Any, unchecked: Unchecked) -> None:
    """CheckpointError when the checkpoint's `RECORD` promises a check `check_checkpoint` found
    nothing for: its zip's CRC-32s were zeroed, or its digests file removed."""
    record = data.get(RECORD) if isinstance(data, dict) else None
    if record is None:
        return  # written before the record existed, or not by zoo: checked as far as it could be
    if not isinstance(record, dict):
        raise _damaged(Path(path), f"its {RECORD} record is not one zoo writes")
    if record.get(DIGESTS) and DIGESTS in unchecked:
        raise _damaged(Path(path), f"its {DIGESTS}, written with it, is missing")
    if record.get(CRC32) and CRC32 in unchecked:
        raise _damaged(Path(path), "it was written with a CRC-32 for every member, and they are all zero now")


def write_digests(directory: str | os.PathLike) -> Path:
    """Record the size and SHA-256 of every file of a sharded checkpoint directory (its files
    are plain files at its top level) in `DIGESTS`, flushed to disk."""
    directory = Path(directory)
    record = {
        p.name: {"size": p.stat().st_size, "sha256": file_digest(p)}
        for p in sorted(directory.iterdir())
        if p.is_file() and p.name != DIGESTS
    }
    target = directory / DIGESTS
    with open(target, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    return target


def _damaged(path: Path, what: str) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {path} is damaged: {what} (bit rot, a partial copy or a disk error); "
        f"it is refused: use another checkpoint, or copy it again from where it was made"
    )


def _check_zip(file: Path, checkpoint: Path) -> Unchecked:
    try:
        if not zipfile.is_zipfile(file):
            return Unchecked()  # torch.load tells a cut file or another format
        with zipfile.ZipFile(file) as archive:
            if not any(info.CRC for info in archive.infolist() if info.file_size):
                return Unchecked({CRC32})  # no CRC to compare: `require_record` says if there were
            bad = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
        raise _damaged(checkpoint, f"{file.name} is not a whole zip archive ({exc})") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {checkpoint} cannot be read ({exc.strerror or exc})") from None
    if bad is not None:
        where = f"{file.name}'s member {bad}" if file != checkpoint else f"its member {bad}"
        raise _damaged(checkpoint, f"{where} does not match the CRC-32 recorded when it was written")
    return Unchecked()


def _check_directory(directory: Path) -> Unchecked:
    record_path = directory / DIGESTS
    unchecked = Unchecked() if record_path.is_file() else Unchecked({DIGESTS})
    if not unchecked:
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise _damaged(directory, f"its {DIGESTS} cannot be read ({type(exc).__name__})") from None
        if not isinstance(record, dict) or not record:
            raise _damaged(directory, f"its {DIGESTS} is not a record of its files")
        for name, expected in sorted(record.items()):
            if not isinstance(expected, dict) or Path(name).name != name or name in ("", ".", ".."):
                raise _damaged(directory, f"its {DIGESTS} names {name!r}, which is not one of its files")
            file = directory / name
            if not file.is_file():
                raise _damaged(directory, f"{name}, recorded in its {DIGESTS}, is missing")
            size = file.stat().st_size
            if size != expected.get("size"):
                raise _damaged(directory, f"{name} has {size:,} bytes, {expected.get('size')} when it was written")
            if file_digest(file) != expected.get("sha256"):
                raise _damaged(directory, f"{name} does not match the SHA-256 recorded when it was written")
    if (directory / META).is_file():
        unchecked |= _check_zip(directory / META, directory)
    return unchecked


def _stamp(path: Path) -> tuple:
    """The checkpoint's identity as the file system gives it: a file's (or, for a directory,
    each of its files') size, modification time and inode."""

    def one(p: Path) -> tuple:
        st = p.stat()
        return (p.name, st.st_size, st.st_mtime_ns, st.st_ino)

    try:
        if path.is_dir():
            return (str(path.resolve()), tuple(one(p) for p in sorted(path.iterdir()) if p.is_file()))
        return (str(path.resolve()), one(path))
    except OSError:
        return (str(path), None)  # unreadable: the check itself says so
