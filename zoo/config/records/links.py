"""No tool follows a link out of a run or sweep directory, for reading or for writing.

A run directory is something people copy, unpack and send; a symbolic link inside it can point
anywhere. Followed, a link at `.hydra/config.yaml` makes a rerun overwrite a file elsewhere, a
link at `compare/` puts zoo-compare's report there, and a link at a sweep's `summary.json` makes
zoo-compare read (and quote, in its message) a file that is not the run's. So every place that
reads or writes a run's or sweep's files asks this module first:

- `inside(path, root)`: `path` itself, when no part of it below `root` is a link that leads out
  of `root`; `LinkedOut` naming the link otherwise. `root` is what the user named (it may itself
  be reached through links: that is the user's choice).
- `check_tree(root)`: the same for everything under `root` (a run or sweep directory before a
  tool writes into it: Hydra writes `.hydra/` and the run's files with a plain open()).
- `check_name(path)`: a link at the very name a record is written to is refused, wherever it
  leads (`zoo.config.records.atomic.replacing`).

A link that stays inside `root` (W&B's `wandb/latest-run`) is no way out and is kept. Nothing
here reads a file's content, so no message ever quotes one."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from zoo.config.errors import ZooError


class LinkedOut(ZooError, OSError):
    """A symbolic link in a run or sweep directory that a tool would follow out of it."""


def _leads_out(link: Path, root_real: str) -> bool:
    target = os.path.realpath(link)
    return not (target == root_real or target.startswith(root_real.rstrip(os.sep) + os.sep))


def link_out(path: str | os.PathLike, root: str | os.PathLike) -> Path | None:
    """The first part of `path` below `root` that is a link leading out of `root`, else None
    (also when `path` or a part of it does not exist yet: nothing there to follow)."""
    path, root = Path(path), Path(root)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise ValueError(f"{path} is not below {root}") from None
    root_real = os.path.realpath(root)
    here = root
    for part in parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode) and _leads_out(here, root_real):
            return here
    return None


def refusal(link: Path, root: str | os.PathLike) -> LinkedOut:
    """The one-line refusal of `link`, a link out of `root`."""
    return LinkedOut(
        f"{link} is a link out of {root}; zoo reads and writes a run's or sweep's files only "
        f"inside its directory: remove the link"
    )


def inside(path: str | os.PathLike, root: str | os.PathLike) -> Path:
    """`path` (below `root`), when no link along it leads out of `root`; LinkedOut otherwise."""
    link = link_out(path, root)
    if link is not None:
        raise refusal(link, root)
    return Path(path)


def tracker_made(entry: Path) -> bool:
    """A link W&B makes itself and zoo never follows: each W&B run's `logs/debug-core.log` points
    at the log of W&B's own service, outside the run (`wandb/offline-run-*/logs/debug-core.log`)."""
    run = entry.parent.parent
    return (
        entry.name == "debug-core.log"
        and entry.parent.name == "logs"
        and "run-" in run.name
        and run.parent.name == "wandb"
    )


def first_link_out(root: str | os.PathLike) -> Path | None:
    """The first link under `root` (in walking order) that leads out of it, else None; the links
    a tracker makes itself (`tracker_made`) are not followed by any tool and are passed over."""
    root = Path(root)
    if not root.is_dir():
        return None
    root_real = os.path.realpath(root)
    for here, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs) + sorted(files):
            entry = Path(here) / name
            if entry.is_symlink() and _leads_out(entry, root_real) and not tracker_made(entry):
                return entry
    return None


def check_tree(root: str | os.PathLike) -> None:
    """LinkedOut for the first link under `root` that leads out of it."""
    link = first_link_out(root)
    if link is not None:
        raise refusal(link, root)


def check_name(path: str | os.PathLike) -> None:
    """LinkedOut when `path` itself is a link (a record is never written through one)."""
    if Path(path).is_symlink():
        raise LinkedOut(f"{path} is a symbolic link; zoo does not write a record through one: remove the link")
