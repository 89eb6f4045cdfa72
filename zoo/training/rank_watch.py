"""The death of one rank ends every rank, with a record naming it.

Lightning's subprocess launcher starts ranks 1..N-1 as children of rank 0. When a child dies,
Lightning's own observer SIGKILLs everyone 5 s later, leaving no word; when rank 0 dies, the
children wait in their next collective until its timeout (30 minutes with gloo). `RankWatch`
closes both gaps: rank 0 polls its children every `POLL_S` and, when one has died, writes
failed.json naming it and ends the run; every other rank polls its parent and, when rank 0 is
gone, writes failed.json naming rank 0 and exits. Both exit status 1 (a run that could not go
on); the same command resumes from the last checkpoint.

Ranks that torchrun's agent or SLURM started are siblings, not parent and children: each leaves
a beacon in the run directory (`.ranks/RANK`: host, pid, parent pid), removed when its process
exits normally, and watches the beacons of the ranks on its own host with the same parent (the
same launch, not an earlier one). A rank whose process is gone while its beacon is still there
was killed: the first to see it writes failed.json naming it and exits; the agent (or srun, or
the failed collectives) ends the rest. Ranks on other hosts cannot be watched from here: their
death shows as a failed collective."""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import lightning as L

from zoo.config.atomic import write_text
from zoo.config.rundir import RunDir
from zoo.training.interrupt import StopNow, ValidationStopped

log = logging.getLogger("zoo")

POLL_S = 1.0
EXIT_STATUS = 1


def _death(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


class RankWatch(L.Callback):
    def __init__(self, run_dir: Path) -> None:
        self.run = RunDir(run_dir)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._started = time.time()
        self._procs: list = []  # rank 0: the ranks it started
        self._parent: Optional[int] = None  # a rank after the first: rank 0's pid
        self._rank = 0
        self._peers = False  # torchrun / srun: watching the beacons of the ranks on this host
        self.died: Optional[str] = None  # what ended the run: a rank's death

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Watch during fit and during the final validation (each a setup ... teardown)."""
        if (self._thread is not None and self._thread.is_alive()) or trainer.world_size < 2:
            return
        procs = getattr(trainer.strategy.launcher, "procs", None)  # Lightning's subprocess launcher
        self._rank = trainer.global_rank
        if trainer.global_rank == 0 and procs:
            self._procs, target = list(procs), self._watch_children
        elif trainer.global_rank > 0 and os.environ.get("LOCAL_RANK") and _started_by_rank_zero():
            self._parent = self._parent or os.getppid()
            target = self._watch_parent
        elif not _started_by_rank_zero():  # torchrun's agent or SLURM started every rank
            _beacon(self.run, self._rank)
            self._peers, target = True, self._watch_peers
        else:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=target, name="zoo-rank-watch", daemon=True)
        self._thread.start()

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self._stop.set()

    def on_exception(self, trainer, pl_module, exception) -> None:
        """A collective that failed because a rank died (gloo notices a closed connection at
        once): the run's record names the rank, not the library's message. A stop of zoo's own
        (a signal in a validation, or a second one) ends every rank on purpose: no rank died."""
        if isinstance(exception, (ValidationStopped, StopNow)):
            return
        # a collective fails on a dead rank's closed sockets a moment before the death itself
        # shows (a child's exit status, a new parent): the kernel closes a process's files first
        if self._peers:
            self.died = _within(3 * POLL_S, self._dead_peer)
        elif self._procs:
            self.died = _within(3 * POLL_S, self._dead_child)
        elif self._parent is not None:
            if _within(3 * POLL_S, lambda: os.getppid() != self._parent) and not self._ended_by_rank_zero():
                self.died = self._parent_gone()
                self._record(self.died)

    def _dead_child(self) -> Optional[str]:
        for rank, proc in enumerate(self._procs, start=1):
            code = proc.poll()
            if code:
                return _message(f"rank {rank} (pid {proc.pid}) {_death(code)}", self.run)
        return None

    def _parent_gone(self) -> str:
        return _message(f"rank 0 (pid {self._parent}) ended without a word; rank {self._rank} stopped too", self.run)

    def _ended_by_rank_zero(self) -> bool:
        """Whether rank 0 wrote the run's record (a finish, a stop, an error) before it went."""
        return any(record.exists() and record.stat().st_mtime >= self._started
                   for record in (self.run.summary, self.run.failed))

    def _watch_children(self) -> None:
        while not self._stop.wait(POLL_S):
            died = self._dead_child()
            if died is None or self._stop.is_set():
                continue
            self._record(died)
            for other in self._procs:
                if other.poll() is None:
                    other.kill()
            os._exit(EXIT_STATUS)

    def _dead_peer(self) -> Optional[str]:
        for rank, pid in _peers(self.run, self._rank):
            if not _alive(pid) and _beacon_of(self.run, rank) is not None:  # gone, not ended normally
                return _message(f"rank {rank} (pid {pid}) ended without a word", self.run)
        return None

    def _watch_peers(self) -> None:
        while not self._stop.wait(POLL_S):
            died = self._dead_peer()
            if died is None or self._stop.is_set() or self._ended_by_rank_zero():
                continue
            self.died = died
            self._record(died)
            os._exit(EXIT_STATUS)

    def _watch_parent(self) -> None:
        while not self._stop.wait(POLL_S):
            if os.getppid() == self._parent:
                continue
            if self._ended_by_rank_zero():  # this rank only follows it
                os._exit(0 if self.run.summary.exists() else EXIT_STATUS)
            self._record(self._parent_gone())
            os._exit(EXIT_STATUS)

    def _record(self, message: str) -> None:
        log.error(message)
        try:
            write_text(self.run.failed, json.dumps({"status": "failed", "error": message}, indent=1))
        except OSError:
            pass
        print(f"zoo-train: error: {message}", file=sys.stderr, flush=True)


def _within(seconds: float, probe):
    """probe() every 0.1 s until it gives something true, for at most `seconds`; its last answer."""
    deadline = time.monotonic() + seconds
    while not (found := probe()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def _message(what: str, run: RunDir) -> str:
    if run.last.exists():
        return f"{what}; every rank stopped. Rerun the same command to resume from {run.last}"
    return f"{what}; every rank stopped, no checkpoint had been written yet"


def _started_by_rank_zero() -> bool:
    """Whether this rank's parent is rank 0 (Lightning's subprocess launcher), not torchrun or
    srun, whose ranks have an agent or SLURM for a parent."""
    return "TORCHELASTIC_RUN_ID" not in os.environ and "SLURM_STEP_ID" not in os.environ


def _beacon(run: RunDir, rank: int) -> None:
    """This rank's beacon (`.ranks/RANK`), removed when the process exits normally."""
    path = run.ranks / str(rank)
    run.ranks.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid()}))
    mine = os.getpid()

    def remove() -> None:
        if (_beacon_of(run, rank) or {}).get("pid") == mine:
            path.unlink(missing_ok=True)

    atexit.register(remove)


def _beacon_of(run: RunDir, rank: int) -> Optional[dict]:
    try:
        return json.loads((run.ranks / str(rank)).read_text())
    except (OSError, ValueError):
        return None


def _peers(run: RunDir, rank: int) -> list[tuple[int, int]]:
    """(rank, pid) of the other ranks of this launch on this host: same host, same parent."""
    host, parent, out = socket.gethostname(), os.getppid(), []
    if not run.ranks.is_dir():
        return out
    for path in run.ranks.iterdir():
        if not path.name.isdigit() or int(path.name) == rank:
            continue
        beacon = _beacon_of(run, int(path.name))
        if beacon and beacon.get("host") == host and beacon.get("ppid") == parent and isinstance(beacon.get("pid"), int):
            out.append((int(path.name), beacon["pid"]))
    return sorted(out)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (dead, not yet reaped by its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
