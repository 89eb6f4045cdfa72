"""The one check of every `out=` (and every other file or directory a tool writes at its end:
zoo-generate's pictures, zoo-bench's table beside its JSON, zoo-compare's and zoo-export's
directories), made at the tool's start, before minutes of work:

- never onto the tool's own input (zoo-eval's checkpoint or data file, zoo-generate's prompts),
  the same file however it is named;
- never onto a run's checkpoints or records (anything in `checkpoints/`, `config.yaml`,
  `summary.json`, `metrics.csv`, `failed.json`, `tracking.json`, `.hydra/*`, `tokenizer/`:
  `RunDir.record`), nor onto a report's tables that zoo-compare reads back (`runs.csv`,
  `comparison.json`, ...);
- never through a link planted at the name;
- a file not named by a directory, in a place a file can be written (a read-only or virtual
  file system is found by trying).

Each is refused on one line naming the key; the file named is left as it was. The writing itself
is `zoo.config.records.atomic` (a new file renamed over the target)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePath

from zoo.config.errors import ConfigError

# a report's tables, which `zoo-compare recompute=` reads back (zoo.compare.table); a directory
# holding the first is a report
REPORT_TABLES = ("comparison.json", "runs.csv", "report.csv", "report.md", "heldout.csv", "pairs.csv")
Inputs = Sequence[tuple[str, "str | os.PathLike | None"]]


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


def kept_record(target: Path) -> tuple[Path, PurePath] | None:
    """(the directory, the path in it) when `target` is one of a run's checkpoints or records
    (in the nearest directory above it that holds a run), a checkpoint anywhere, or one of a
    report's tables; looked up
    as named and with its links followed, so neither `..` nor a linked folder leads past it."""
    from zoo.config.records.rundir import RunDir

    for path in dict.fromkeys((Path(os.path.abspath(target)), Path(os.path.realpath(target)))):
        for above in path.parents:
            if RunDir(above).holds_run():
                relative = path.relative_to(above)
                if RunDir(above).record(relative):
                    return above, relative
                break
        if path.name in REPORT_TABLES and (path.parent / REPORT_TABLES[0]).is_file():
            return path.parent, PurePath(path.name)
        if path.suffix == ".ckpt" and os.path.lexists(path):  # a checkpoint outside any run
            return path.parent, PurePath(path.name)
    return None


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_target(key: str, value: str, example: str, reads: Inputs = ()) -> None:
    """`key=value` (a file or directory the tool will write) is none of the tool's inputs
    (`reads`: (key, path) pairs), none of a run's checkpoints or records and no link."""
    target = Path(value)
    for name, given in reads:
        if given is not None and same_file(target, Path(given)):
            raise ConfigError(
                f"{key}={value} is the file this command reads ({name}={given}); it would be "
                f"replaced: give another file, e.g. {key}={example}"
            )
    kept = kept_record(target)
    if kept is not None:
        where, relative = kept
        raise ConfigError(
            f"{key}={value} is {relative.as_posix()} of {where}; zoo never writes a tool's output "
            f"onto a run's checkpoints or records or a report's tables: give a place outside "
            f"them, e.g. {key}={example}"
        )
    if target.is_symlink():
        raise ConfigError(
            f"{key}={value} is a symbolic link; zoo does not write through one: remove the link or give another file"
        )


def check_out_file(key: str, value: str | None, example: str = "result.json", *, reads: Inputs = ()) -> None:
    """`out=FILE`: not a directory, none of the tool's inputs or a run's records
    (`check_target`), and in a writable place."""
    if value is None:
        return
    target = Path(value)
    if target.is_dir():
        raise ConfigError(
            f"{key}={value} is a directory; {key}= names the file to write, e.g. {key}={target / example}"
        )
    check_target(key, value, example, reads)
    writable_place(key, value, target)


def check_out_dir(key: str, value: str, example: str = "out/") -> None:
    """`out=DIR` (a directory to make or fill): not inside a run's checkpoints or records, and
    in a writable place."""
    target = Path(value)
    check_target(key, value, example)
    if not target.exists():
        writable_place(key, value, target)
