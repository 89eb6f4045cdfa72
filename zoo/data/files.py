"""The user's own files (`data.source=local`) and Hugging Face Hub datasets
(`data.source=hub`), read through `datasets.load_dataset`.

Local files are checked before `datasets` sees them, so the common mistakes get a one-line
`DataError` naming the file: no match, unknown extension, mixed formats, an empty file, bytes
that are not UTF-8.
"""

from __future__ import annotations

import codecs
import errno
import glob
import os
from collections.abc import Sequence
from pathlib import Path

from zoo.data.errors import DataError
from zoo.data.integrity import checked, first_line

# file extension -> datasets packaged builder
BUILDERS = {
    ".txt": "text",
    ".text": "text",
    ".jsonl": "json",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
}
TEXT_BUILDERS = ("text", "json", "csv")  # formats whose bytes must be UTF-8
VALIDATION_SPLITS = ("validation", "valid", "dev", "test")

PathSpec = str | Sequence[str]


def resolve_files(spec: PathSpec, key: str = "data.path") -> list[str]:
    """Expand `~`, globs and directories (their files with a known extension, sorted) into
    a list of existing files."""
    items = [spec] if isinstance(spec, str) else list(spec)
    files: list[str] = []
    for item in items:
        path = os.path.expanduser(str(item))
        if glob.has_magic(path):
            matches = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
            if not matches:
                raise DataError(f"{key}: no file matches {item!r}")
            files.extend(matches)
        elif os.path.isdir(path):
            found = sorted(str(p) for p in Path(path).iterdir() if p.is_file() and p.suffix.lower() in BUILDERS)
            if not found:
                raise DataError(f"{key}: directory {item!r} holds no {_known()} file")
            files.extend(found)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise DataError(f"{key}: no such file: {item!r}")
    return files


def builder_for(files: list[str], key: str = "data.path") -> str:
    """The one `datasets` builder that reads all of `files`, chosen by extension."""
    builders = set()
    for f in files:
        ext = Path(f).suffix.lower()
        if ext not in BUILDERS:
            raise DataError(f"{key}: unsupported file type {ext or '(none)'!r} of {f}; use {_known()}")
        builders.add((BUILDERS[ext], ext == ".tsv"))
    if len(builders) > 1:
        raise DataError(
            f"{key}: files of different formats cannot be mixed: {', '.join(sorted({Path(f).suffix for f in files}))}"
        )
    return builders.pop()[0]


def check_local_paths(path: PathSpec | None, val_path: PathSpec | None = None) -> None:
    """Before a run starts (and before torch loads): data.path and data.val_path name files
    that exist, of one known format, none of them empty. Their bytes are read later, by the
    preparation that tokenizes them (a prepared corpus is never read again)."""
    for key, spec in (("data.path", path), ("data.val_path", val_path)):
        if spec is None:
            continue
        files = resolve_files(spec, key)
        builder_for(files, key)
        for f in files:
            if os.path.getsize(f) == 0:
                raise DataError(f"{key}: {f} is empty")


def check_file(path: str, builder: str, key: str = "data.path") -> None:
    """Refuse an empty file, and bytes that are not UTF-8 in a text format."""
    if os.path.getsize(path) == 0:
        raise DataError(f"{key}: {path} is empty")
    if builder not in TEXT_BUILDERS:
        return
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                at = offset + exc.start
                raise DataError(
                    f"{key}: {path} is not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at "
                    f"offset {at}); re-encode it as UTF-8"
                ) from None
            if not chunk:
                break
            offset += len(chunk)


def load_files(spec: PathSpec, *, sample_by: str = "line", cache_dir: str | None = None, key: str = "data.path"):
    """One `datasets.Dataset` holding the rows of every file of `spec`."""
    import datasets

    files = resolve_files(spec, key)
    builder = builder_for(files, key)
    for f in files:
        check_file(f, builder, key)
    kwargs = {}
    if builder == "text":
        kwargs["sample_by"] = sample_by
    if all(Path(f).suffix.lower() == ".tsv" for f in files):
        kwargs["delimiter"] = "\t"
    what = f"{key}={_names(files)}"

    def read(fresh: bool):
        return datasets.load_dataset(
            builder,
            data_files={"train": files},
            split="train",
            cache_dir=cache_dir,
            download_mode="force_redownload" if fresh else None,
            **kwargs,
        )

    try:
        ds = checked(read, what)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC):
            raise DataError(
                f"{key}: the datasets cache cannot be written ({exc.strerror}: "
                f"{exc.filename}); point data.cache_dir or ZOO_CACHE at a writable "
                f"directory"
            ) from None
        raise DataError(f"{key}: could not read {_names(files)} as {builder}: {first_line(exc)}") from exc
    except Exception as exc:  # datasets and pyarrow raise many types for malformed files
        bad = next(filter(None, (bad_json_line(f) for f in files)), None) if builder == "json" else None
        if bad is not None:
            raise DataError(f"{key}: {bad}") from None
        raise DataError(f"{key}: could not read {_names(files)} as {builder}: {first_line(exc)}") from exc
    if builder == "text":
        ds = checked(lambda fresh: ds.filter(_non_blank, batched=True, load_from_cache_file=not fresh), what)
    if len(ds) == 0:
        raise DataError(f"{key}: {_names(files)} holds no examples")
    return ds


def bad_json_line(path: str) -> str | None:
    """Where a JSON Lines file (one object a line) first breaks: "FILE, line N: ..." (datasets
    names no line); None when every line holds an object, or the file is one JSON document."""
    import json

    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                if number == 1 and line.lstrip().startswith("["):
                    return None  # a JSON array over several lines, not JSON Lines
                what = (
                    f"{exc.msg.removesuffix(' at')}, column {exc.colno}"
                    if isinstance(exc, json.JSONDecodeError)
                    else str(exc)
                )
                return f"{path}, line {number}: not valid JSON ({what}); each line of a .jsonl file is one object"
            if not isinstance(row, dict):
                return f"{path}, line {number}: a {type(row).__name__}, not an object; each line of a .jsonl file is one object"
    return None


def _non_blank(batch) -> list[bool]:
    return [bool(t.strip()) for t in batch["text"]]


def load_hub(name: str, config: str | None = None, cache_dir: str | None = None):
    """(train, validation or None) of a Hub dataset; validation is the first of
    validation / valid / dev / test that exists."""
    import datasets

    try:
        splits = datasets.load_dataset(name, config, cache_dir=cache_dir)
    except Exception as exc:
        raise DataError(f"data.hub_name={name!r}: could not load it: {first_line(exc)}") from exc
    if "train" not in splits:
        raise DataError(f"data.hub_name={name!r} has no train split; splits: {', '.join(splits)}")
    val = next((splits[s] for s in VALIDATION_SPLITS if s in splits), None)
    return splits["train"], val


def _known() -> str:
    return ", ".join(BUILDERS)


def _names(files: list[str]) -> str:
    return files[0] if len(files) == 1 else f"{files[0]} (+{len(files) - 1} more)"
