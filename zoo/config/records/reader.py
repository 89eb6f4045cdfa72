"""The one reader of the files zoo reads back: a run's `summary.json`, `failed.json` and
`metrics.csv`, and a report's `runs.csv`, `comparison.json`, `report.csv`, `heldout.csv`,
`pairs.csv` and `report.md`. Each is read the same way:

- a regular file (a pipe would block the read, a device has no end), reached through no link
  out of the directory it belongs to (its run or report: `zoo.config.records.links`), whose
  content is then never read or quoted;
- at most `limit` bytes (a record of a real run is far below it);
- UTF-8, a JSON object or a CSV table;
- a table's cells checked against its schema (`Column`): a column it must have, a number that
  must be a finite figure of a run (`figure_problem`), a count, a word of a list, a name.

Whatever is wrong is a `DamagedRecord`: one line naming the file, the line and column where it
can, what is wrong, and what to do (`remedy`), never a traceback, never a number taken as it
came. Torch-free, like all of `zoo.config`."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.config.errors import ZooError
from zoo.config.records.links import link_out, refusal

MiB = 2**20
TABLE_BYTES = 256 * MiB  # a table of a report or a run's metrics.csv (a million logged steps)
RECORD_BYTES = 16 * MiB  # a JSON record: summary.json, failed.json, comparison.json
RUN_REMEDY = "run it again or remove the run directory"
REPORT_REMEDY = "run zoo-compare on its sweeps again"

# the largest figure a run can report: no loss, perplexity, count or rate of a real run is near
# it, and sums and means of figures below it cannot overflow
LARGEST_FIGURE = 1e30
NOT_NEGATIVE = ("loss", "ppl", "bpb", "accuracy", "bleu", "exact_match")  # a metric's last name part


class DamagedRecord(ZooError, ValueError):
    """A file zoo reads back (a run's record, a report's table) that is not what zoo writes."""


def figure_problem(name: str, value: float) -> str | None:
    """Why `value` cannot be the figure `name` of a run (a metric, count, time or rate), or None:
    not finite, beyond LARGEST_FIGURE, or a negative loss, perplexity, accuracy or score."""
    if not math.isfinite(value) or abs(value) > LARGEST_FIGURE:
        return "not a finite figure of a run"
    if value < 0 and name.rsplit("/", 1)[-1] in NOT_NEGATIVE:
        return "negative"
    return None


def read_bytes(path: Path, *, root: Path | None, limit: int, remedy: str) -> bytes:
    """The bytes of `path`, a regular file reached through no link out of `root` (its run or
    report directory; None: `path` is what the user named) and at most `limit` bytes long."""
    path = Path(path)
    if root is not None:
        link = link_out(path, root)
        if link is not None:
            raise refusal(link, root)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise DamagedRecord(f"{path} cannot be read ({exc.strerror or exc}); {remedy}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DamagedRecord(f"{path} is not a regular file (a pipe, device or directory); {remedy}")
        if info.st_size > limit:
            raise DamagedRecord(f"{path} is {info.st_size:,} bytes, more than such a file holds ({limit:,}); {remedy}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise DamagedRecord(f"{path} grew past {limit:,} bytes while it was read; {remedy}")
    return data


def read_text(path: Path, *, root: Path | None = None, limit: int = TABLE_BYTES, remedy: str = RUN_REMEDY) -> str:
    """`read_bytes`, as UTF-8 text; a byte that is not names its line and column."""
    data = read_bytes(path, root=root, limit=limit, remedy=remedy)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DamagedRecord(
            f"{path}, line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 text; {remedy}"
        ) from None


def read_json_object(
    path: Path, *, root: Path | None = None, limit: int = RECORD_BYTES, remedy: str = RUN_REMEDY
) -> dict[str, Any]:
    """A JSON object from `path` (`read_text`). (Python writes a NaN as `NaN`: it reads back,
    and the reader of the record judges its figures.)"""
    text = read_text(path, root=root, limit=limit, remedy=remedy)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DamagedRecord(f"{path} is damaged (not JSON: {' '.join(str(exc).split())}); {remedy}") from None
    if not isinstance(value, dict):
        raise DamagedRecord(f"{path} is damaged (a JSON {type(value).__name__}, not an object); {remedy}")
    return value


@dataclass(frozen=True)
class Column:
    """One column of a table and what its cells may hold. `kind`: "figure" (a number checked by
    `figure_problem`, or empty), "count" (a figure not below 0), "setting" (text, or a finite
    number), "name" (text, not empty), "word" (one of `words`), "text" (anything). `required`:
    the table has no meaning without it."""

    name: str
    kind: str = "text"
    required: bool = True
    words: tuple[str, ...] = ()


def _number(cell: str) -> float | None:
    """A cell as a number (None: empty); ValueError for text. A leading quote marks text (a cell
    that started like a formula), never a number."""
    if cell == "":
        return None
    return float(cell)


def cell_problem(column: Column, cell: str) -> str | None:
    """Why `cell` cannot be in `column`, or None."""
    if column.kind == "word":
        return None if cell in column.words else f"{cell[:40]!r} is not one of {', '.join(column.words)}"
    if column.kind == "name":
        return None if cell else "empty"
    if column.kind not in ("figure", "count", "setting"):
        return None
    try:
        value = _number(cell)
    except ValueError:
        return None if column.kind == "setting" else f"{cell[:40]!r} is not a number"
    if value is None:
        return None
    if column.kind == "setting":
        finite = math.isfinite(value) and abs(value) <= LARGEST_FIGURE
        return None if finite else f"{cell[:40]} is not a finite setting"
    why = figure_problem(column.name, value)
    if why is None and column.kind == "count" and value < 0:
        why = "negative"
    return None if why is None else f"{cell[:40]} is {why}"


def read_table(
    path: Path,
    columns: Sequence[Column] = (),
    *,
    root: Path | None = None,
    limit: int = TABLE_BYTES,
    remedy: str = RUN_REMEDY,
    rows_of_header: bool = True,
) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the CSV table `path` (`read_text`): every row as long as the header,
    every column of `columns` marked required present, and every cell of one of `columns` fit
    for it (`cell_problem`); a DamagedRecord naming the line and column otherwise."""
    text = read_text(path, root=root, limit=limit, remedy=remedy)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, [])
        rows = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise DamagedRecord(f"{path}, line {reader.line_num}: not CSV ({exc}); {remedy}") from None
    missing = [c.name for c in columns if c.required and c.name not in header]
    if missing:
        raise DamagedRecord(f"{path}, line 1: no column {missing[0]!r}; {remedy}")
    checked = [(i, c) for c in columns for i, name in enumerate(header) if name == c.name]
    for line, row in rows:
        if rows_of_header and len(row) != len(header):
            raise DamagedRecord(f"{path}, line {line}: {len(row)} cells, its header has {len(header)}; {remedy}")
        for i, column in checked:
            why = cell_problem(column, row[i]) if i < len(row) else None
            if why is not None:
                raise DamagedRecord(f"{path}, line {line}, column {column.name}: {why}; {remedy}")
    return header, [row for _, row in rows]


def check_fields(path: Path, record: dict[str, Any], fields: dict[str, tuple[type, ...]], *, remedy: str) -> None:
    """Each key of `fields` in the JSON object `record` (of `path`) holds a value of one of its
    types (None among them: the key may be absent or null); a DamagedRecord naming the key
    otherwise."""
    names = {dict: "an object", list: "a list", str: "text", bool: "true or false", type(None): "null"}
    for key, kinds in fields.items():
        value = record.get(key)
        fits = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if not fits:
            wanted = " or ".join(names.get(k, k.__name__) for k in kinds)
            given = "missing" if key not in record else f"{json.dumps(value)[:40]}"
            raise DamagedRecord(f"{path}: {key} is {given}, not {wanted}; {remedy}")
