"""A run directory belongs to one run at a time: its lock (`.zoo-lock`) and what may hold a run.

`zoo-train` takes `RUN_DIR/.zoo-lock` (the owner's host, pid and SLURM job) before Hydra writes
anything there and gives it back when the command ends. A second command on a directory whose
owner is alive is refused on one line; a lock whose owner is gone (a killed run on this host, or
an earlier attempt of this same SLURM job, i.e. a requeue) is taken over. Two commands started in
the same second with the default `runs/DATE/TIME` directory do not meet: the second finds the
name taken and runs in `runs/DATE/TIME-1` (then -2, ...). A start time handed down by a launcher
(the ranks of one run, a requeued job) keeps its directory: that is how they share one."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from zoo.config.errors import ZooError
from zoo.config.records.atomic import write_text
from zoo.config.records.links import check_tree, link_out
from zoo.config.records.rundir import RunDir


class RunDirBusy(ZooError, RuntimeError):
    """A live run owns the directory."""


class ForeignRunDir(ZooError, RuntimeError):
    """The directory holds files but no zoo run, or a link where zoo writes a run file."""


def check_contents(run_dir: Path) -> None:
    """ForeignRunDir, on one line, for a directory zoo must not write a run into: one that holds
    files but none a zoo run leaves (someone's config.yaml and metrics.csv would be overwritten),
    or one with a link at a name zoo writes (`tokenizer/` planted as a link to elsewhere would be
    written through), or a link that leads out of a directory zoo or a tool writes into (Hydra
    writes `.hydra/` with a plain open(); `zoo.config.records.links`). A name zoo never writes
    is its owner's: left alone."""
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except FileNotFoundError:
        return
    run = RunDir(run_dir)
    for entry in entries:
        if entry.is_symlink() and entry.name != RunDir.LOCK and run.names(entry.name):
            raise ForeignRunDir(
                f"{entry.path} is a link; zoo writes a run's files only inside its run directory: "
                f"remove the link, or choose another hydra.run.dir"
            )
    checkpoints = run.checkpoints
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        for entry in os.scandir(checkpoints):
            if entry.is_symlink():
                raise ForeignRunDir(
                    f"{entry.path} is a link; zoo writes checkpoints only inside its run "
                    f"directory: remove the link, or choose another hydra.run.dir"
                )
    for name in (RunDir.HYDRA, RunDir.TOKENIZER, RunDir.CHECKPOINTS, RunDir.TENSORBOARD, RunDir.WANDB, RunDir.RANKS):
        check_tree(run_dir / name)  # what zoo, Hydra and the trackers write below: no link out
    if entries and not run.holds_run():
        shown = ", ".join(e.name for e in entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise ForeignRunDir(
            f"{run_dir} holds files but no zoo run ({shown}); a run writes config.yaml, "
            f"metrics.csv and more there: choose a new or empty hydra.run.dir"
        )


def _me() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "slurm_job": os.environ.get("SLURM_JOB_ID")}


def _alive(owner: dict) -> bool:
    me = _me()
    if owner.get("slurm_job") and owner.get("slurm_job") == me["slurm_job"]:
        return False  # an earlier attempt of this very job (requeued): gone
    if owner.get("host") != me["host"]:
        return True  # another machine's process: it cannot be checked from here, so it counts as alive
    try:
        os.kill(int(owner.get("pid", -1)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True
    return True


def owner_of(run_dir: Path) -> dict | None:
    try:
        return json.loads(RunDir(run_dir).lock.read_text())
    except (OSError, ValueError):
        return None


def acquire(run_dir: Path) -> None:
    """Take the directory's lock, or raise RunDirBusy naming its live owner (ForeignRunDir for
    a directory that must not hold a run, `check_contents`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    check_contents(run_dir)
    lock = RunDir(run_dir).lock
    mine = json.dumps(_me())
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        owner = owner_of(run_dir) or {}
        if owner and _alive(owner):
            raise RunDirBusy(
                f"run directory {run_dir} is in use by a running zoo-train (host {owner.get('host')}, pid "
                f"{owner.get('pid')}); wait for it to end, or choose another hydra.run.dir"
            ) from None
        write_text(lock, mine)  # its owner is gone: taken over (a new file of an unpredictable name, renamed)
        return
    with os.fdopen(fd, "w") as f:
        f.write(mine)


def held_here(run_dir: Path) -> bool:
    """This process owns the directory's lock."""
    owner = owner_of(run_dir) or {}
    return owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname()


def release(run_dir: Path) -> None:
    """Give the lock back, when this process holds it (nothing otherwise)."""
    if held_here(run_dir):
        RunDir(run_dir).lock.unlink(missing_ok=True)


def claim_default(run_dir: Path) -> Path:
    """Create `run_dir`, or, when it exists (another run started in the same second), the first
    `run_dir-N` that does not; creating a directory is atomic, so two commands never share one."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = run_dir, 0
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = run_dir.with_name(f"{run_dir.name}-{n}")


def runs_with_checkpoints(root: Path) -> list[Path]:
    """Run directories under `root` (ROOT/DATE/TIME) that hold a last.ckpt, the most recently
    saved first; one whose last.ckpt is reached through a link out of `root` is not looked at."""
    found = [p.parent.parent for p in root.glob(f"*/*/{RunDir.CHECKPOINTS}/{RunDir.LAST}") if link_out(p, root) is None]
    return sorted(found, key=lambda d: RunDir(d).last.stat().st_mtime, reverse=True)
