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
which says so, and so is one written without CRCs (`torch.serialization.set_crc32_options(False)`
records zeros). A checkpoint that passed is remembered for the process by its size, modification
time and inode, so the several reads of one resume check it once."""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from pathlib import Path

from zoo.config.errors import CheckpointError
from zoo.config.records.rundir import SHARDED_META as META
from zoo.data.integrity import file_digest

DIGESTS = "zoo-digests.json"  # in a sharded checkpoint directory: {file name: {"size", "sha256"}}
_checked: set[tuple] = set()


def check_checkpoint(path: str | os.PathLike) -> None:
    """CheckpointError (one line) when the checkpoint file or sharded directory at `path` no
    longer holds the bytes it was written with."""
    path = Path(path)
    key = _stamp(path)
    if key in _checked:
        return
    if path.is_dir():
        _check_directory(path)
    else:
        _check_zip(path, path)
    _checked.add(key)


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


def _check_zip(file: Path, checkpoint: Path) -> None:
    try:
        if not zipfile.is_zipfile(file):
            return  # torch.load tells a cut file or another format
        with zipfile.ZipFile(file) as archive:
            if not any(info.CRC for info in archive.infolist() if info.file_size):
                return  # written with torch.serialization.set_crc32_options(False): no CRC to compare
            bad = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
        raise _damaged(checkpoint, f"{file.name} is not a whole zip archive ({exc})") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {checkpoint} cannot be read ({exc.strerror or exc})") from None
    if bad is not None:
        where = f"{file.name}'s member {bad}" if file != checkpoint else f"its member {bad}"
        raise _damaged(checkpoint, f"{where} does not match the CRC-32 recorded when it was written")


def _check_directory(directory: Path) -> None:
    record_path = directory / DIGESTS
    if record_path.is_file():
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
        _check_zip(directory / META, directory)


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
