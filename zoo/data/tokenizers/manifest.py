"""The files of a saved tokenizer, each with its SHA-256 (`files` in tokenizer.json), checked
before any of them is read.

`Tokenizer.save` records the manifest; `registry.load_tokenizer` checks it before a model file
reaches the library that parses it: the directory holds exactly the recorded files (a file
added beside them, a Python file among them, is refused), none is a link, and each has the
digest recorded when it was saved. A name that a record gives for a file (`path`, `model_file`)
stays inside the directory (`inside`). Records written before the manifest existed have no
`files`; their files are then checked after the load, against the tokenizer's own digest, as
before (no loader of a kind runs code: transformers is told to refuse remote code).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from zoo.data.errors import DataError
from zoo.data.integrity import file_digest

META_NAME = "tokenizer.json"  # zoo's own record, the one file the manifest does not list


def _files(directory: Path) -> dict[str, Path]:
    """Every entry under `directory` but the record, by its relative POSIX name."""
    return {
        p.relative_to(directory).as_posix(): p
        for p in sorted(directory.rglob("*"))
        if p.relative_to(directory).as_posix() != META_NAME
    }


def file_manifest(directory: Path) -> dict[str, str]:
    """{relative name: sha256} of every file under `directory` but tokenizer.json."""
    return {name: file_digest(p) for name, p in _files(directory).items() if p.is_file() and not p.is_symlink()}


def check_manifest(recorded: dict | None, directory: Path) -> None:
    """The files under `directory` are exactly `recorded` (name -> sha256), plain files, unchanged.
    `recorded` None: a record from before the manifest (see the module docstring)."""
    if recorded is None:
        return
    if not isinstance(recorded, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in recorded.items()
    ):
        raise DataError(f"the tokenizer in {directory}: its record's file list is not a list of files and digests")
    present = _files(directory)
    links = sorted(name for name, p in present.items() if p.is_symlink())
    if links:
        raise DataError(f"the tokenizer in {directory}: {links[0]} is a link; a tokenizer's files are plain files")
    present = {name: p for name, p in present.items() if p.is_file()}
    extra = sorted(set(present) - set(recorded))
    if extra:
        raise DataError(f"the tokenizer in {directory} holds {extra[0]}, which its record does not list")
    missing = sorted(set(recorded) - set(present))
    if missing:
        raise DataError(f"the tokenizer in {directory} lacks {missing[0]}, which its record lists")
    for name, digest in sorted(recorded.items()):
        if file_digest(present[name]) != digest:
            raise DataError(
                f"the tokenizer in {directory}: {name} does not match the digest recorded when "
                f"it was saved (changed or damaged)"
            )


def inside(directory: Path, name: object, key: str) -> Path:
    """`directory / name` for a relative name that stays in `directory` and is no link."""
    parts = PurePosixPath(name).parts if isinstance(name, str) and name else ()
    if not isinstance(name, str) or not parts or PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name:
        raise DataError(f"the tokenizer in {directory}: its record's {key} {name!r} is not a name inside it")
    path = directory.joinpath(*parts)
    if any(p.is_symlink() for p in (path, *path.parents) if p.is_relative_to(directory) and p != directory):
        raise DataError(f"the tokenizer in {directory}: its record's {key} {name!r} is a link")
    return path
