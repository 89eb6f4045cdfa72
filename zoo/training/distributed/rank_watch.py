"""The death of one rank ends every rank, with a record naming it.

Lightning's subprocess launcher starts ranks 1..N-1 as children of rank 0. When a child dies,
Lightning's own observer SIGKILLs everyone 5 s later, leaving no word; when rank 0 dies, the
children wait in their next collective until its timeout (30 minutes with gloo). `RankWatch`
closes both gaps: rank 0 polls its children every `POLL_S` and, when one has died, writes
failed.json naming it and ends the run (Lightning's observer, when it sees the death first, ends
the run the same way); every other rank polls its parent and, when rank 0 is
gone, writes failed.json naming rank 0 and exits. Both exit status 1 (a run that could not go
on); the same command resumes from the last checkpoint.

Every rank of a job on several processes also leaves a beacon in the run directory
(`.ranks/RANK`: host, pid, local rank and the launch, a token rank 0 draws and broadcasts),
removed when its process exits normally, and beats a heartbeat beside it (`.ranks/RANK.beat`, a
counter rewritten in place every `BEAT_S`) for as long as the process lives.

- Ranks on the same host are watched by their process: a rank of this launch whose process is
  gone while its beacon is still there was killed. Ranks that torchrun's agent or SLURM started
  (siblings, not parent and children) watch each other this way.
- Ranks on other hosts are watched by their heartbeat: the first rank of each host reads the
  beats of the first rank of every other host every `BEAT_S`, and one that has not changed for
  `callbacks.rank_silence_s` seconds (30 by default) of the reader's own monotonic clock (no clock of another machine is
  compared) has died or hangs. A rank on another host that dies ends its own host's ranks
  first (they watch it by process), so watching each host's first rank is enough.

The first rank to see a death writes failed.json naming it and exits; a rank that finds such a
record of this run already written exits without writing another, so the record names the rank
that died, not the ones that stopped after it."""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import lightning as L

try:  # Lightning's watcher of the ranks its launcher started (private: its ending is taken over below)
    from lightning.fabric.strategies.launchers.subprocess_script import _ChildProcessObserver
except ImportError:  # a Lightning without it: nothing of it to take over
    _ChildProcessObserver = None  # type: ignore[assignment,misc]

from zoo.config.records.atomic import write_text
from zoo.config.records.rundir import RunDir, RunFailure
from zoo.config.schema.train import BEAT_S, RANK_SILENCE_S
from zoo.training.signals.interrupt import StopNow, ValidationStopped

log = logging.getLogger("zoo")

POLL_S = 1.0  # how often the ranks on this host are looked at
EXIT_STATUS = 1
_OBSERVED = "a rank started by rank 0 ended"  # Lightning's observer saw it, no longer in the list
GRACE_S = 10.0  # a stop every rank makes (a shared signal): rank 0's time to record it and exit
_STOPPED = {128 + signal.SIGINT, 128 + signal.SIGTERM, -signal.SIGINT, -signal.SIGTERM}  # a rank's stop on a signal
BEAT = ".beat"  # the suffix of a rank's heartbeat file beside its beacon


def _death(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


class RankWatch(L.Callback):
    def __init__(self, run_dir: Path, *, stale_s: float = RANK_SILENCE_S) -> None:
        self.run = RunDir(run_dir)
        self.stale_s = stale_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.time()
        self._procs: list = []  # rank 0: the ranks it started
        self._parent: int | None = None  # a rank after the first: rank 0's pid
        self._rank = 0
        self._launch: str | None = None  # this launch's token (rank 0's, broadcast)
        self._peers = False  # torchrun / srun: watching the beacons of the ranks on this host
        self._remote: _Heartbeats | None = None  # the first rank of a host: other hosts' beats
        self.died: str | None = None  # what ended the run: a rank's death

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Watch during fit and during the final validation (each a setup ... teardown)."""
        if trainer.world_size < 2:
            return
        if self._launch is None:  # the first setup, on every rank at once: one broadcast
            self._launch = trainer.strategy.broadcast(secrets.token_hex(8), src=0)
            self._rank = trainer.global_rank
            _beacon(self.run, self._rank, self._launch, trainer.local_rank)
            if trainer.local_rank == 0:
                self._remote = _Heartbeats(self.run, self._launch, self.stale_s)
        if self._thread is not None and self._thread.is_alive():
            return
        procs = getattr(trainer.strategy.launcher, "procs", None)  # Lightning's subprocess launcher
        if procs:
            self._procs = list(procs)
            self._take_over_observer()
        elif trainer.global_rank > 0 and os.environ.get("LOCAL_RANK") and _started_by_rank_zero():
            self._parent = self._parent or os.getppid()
        else:  # torchrun's agent or SLURM started every rank
            self._peers = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="zoo-rank-watch", daemon=True)
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
        # shows (a child's exit status, a new parent, a beat that stops): the kernel closes a
        # process's files first
        if self._parent is not None:
            if _within(3 * POLL_S, lambda: os.getppid() != self._parent) and not self._recorded():
                self.died = self._parent_gone()
                self._record(self.died)
            return
        self.died = _within(3 * POLL_S, self._dead_here)
        if self.died is None and self._remote is not None and self._remote.watching():
            self.died = _within(self.stale_s + 2 * BEAT_S, self._remote.dead, every=BEAT_S)
        if self.died is not None and not self._recorded():  # written now: Lightning's observer may
            _write_failure(self.run, self.died)  # end this process before the error is handled

    def _take_over_observer(self) -> None:
        """Lightning's observer of the ranks it started SIGKILLs this process the moment it sees
        one end non-zero, which can be before the watch or the failed collective has written the
        record: its ending goes through `_observed` instead."""
        if _ChildProcessObserver is None:
            return
        for thread in threading.enumerate():
            if isinstance(thread, _ChildProcessObserver) and not getattr(thread, "_zoo_watched", False):
                thread._terminate_all = functools.partial(self._observed, thread._terminate_all)  # type: ignore[method-assign]
                thread._zoo_watched = True  # type: ignore[attr-defined]

    def _observed(self, terminate_all) -> None:
        """Lightning's observer saw a rank end non-zero. Inside a stage this watch watches, and
        not a stop on a signal: a death, recorded and ended by `_end`. Otherwise every rank is
        stopping on purpose (a shared signal, the end of a stage) and rank 0 writes its record
        and exits on its own: Lightning's ending (SIGKILL, for a rank 0 that hangs) comes only
        GRACE_S later (this thread is a daemon: an exit does not wait for it)."""
        if not self._stop.is_set() and not any(p.poll() in _STOPPED for p in self._procs):
            self._end(self._dead_child() or _message(_OBSERVED, self.run))
        time.sleep(GRACE_S)
        terminate_all()

    # -- what is looked at ----------------------------------------------------------------------

    def _dead_here(self) -> str | None:
        """A rank on this host that died: a child (Lightning's launcher) or a sibling (torchrun)."""
        if self._procs:
            return self._dead_child()
        if self._peers:
            return self._dead_peer()
        return None

    def _dead_child(self) -> str | None:
        for rank, proc in enumerate(self._procs, start=1):
            code = proc.poll()
            if code:
                return _message(f"rank {rank} (pid {proc.pid}) {_death(code)}", self.run)
        return None

    def _dead_peer(self) -> str | None:
        for rank, pid in _peers(self.run, self._rank, self._launch):
            if not _alive(pid) and _beacon_of(self.run, rank) is not None:  # gone, not ended normally
                return _message(f"rank {rank} (pid {pid}) ended without a word", self.run)
        return None

    def _parent_gone(self) -> str:
        return _message(f"rank 0 (pid {self._parent}) ended without a word; rank {self._rank} stopped too", self.run)

    def _finished(self) -> bool:
        """Whether this run's summary was written since this process started: it finished."""
        summary = self.run.summary
        return summary.exists() and summary.stat().st_mtime >= self._started

    def _recorded(self) -> bool:
        """Whether the run's record (a finish, a stop, an error, a death another rank saw) was
        written since this process started."""
        return any(
            record.exists() and record.stat().st_mtime >= self._started
            for record in (self.run.summary, self.run.failed)
        )

    # -- the watch ------------------------------------------------------------------------------

    def _watch(self) -> None:
        next_beats = time.monotonic()
        while not self._stop.wait(POLL_S):
            if self._parent is not None:
                if os.getppid() == self._parent:
                    died = None
                elif self._recorded():  # rank 0 wrote the run's record before it went: follow it
                    os._exit(0 if self.run.summary.exists() else EXIT_STATUS)
                else:
                    died = self._parent_gone()
            else:
                died = self._dead_here()
            if died is None and self._remote is not None and time.monotonic() >= next_beats:
                next_beats = time.monotonic() + BEAT_S
                died = self._remote.dead()
            if died is None or self._stop.is_set():
                continue
            self._end(died)

    def _end(self, died: str) -> None:
        """A rank died: record it (unless a record of this run is written already: the rank that
        wrote it saw the death first) and end this process and the ranks it started."""
        try:
            if not self._recorded():
                self.died = died
                self._record(died)
            elif self.died is not None:  # recorded by a failed collective here, whose error line is not printed yet
                print(f"zoo-train: error: {self.died}", file=sys.stderr, flush=True)
            for other in self._procs:
                if other.poll() is None:
                    other.kill()
        finally:  # on any thread, whatever happened above
            os._exit(0 if self._finished() else EXIT_STATUS)

    def _record(self, message: str) -> None:
        log.error(message)
        _write_failure(self.run, message)
        print(f"zoo-train: error: {message}", file=sys.stderr, flush=True)


class _Heartbeats:
    """The beats of the first rank of every other host of this launch, as this host's first rank
    reads them: when each last changed, by this process's monotonic clock."""

    def __init__(self, run: RunDir, launch: str, stale_s: float) -> None:
        self.run, self.launch, self.stale_s = run, launch, stale_s
        self.host = socket.gethostname()
        self._seen: dict[int, tuple[str | None, float]] = {}  # rank: (its beat, when it changed)

    def watching(self) -> bool:
        return bool(self._others())

    def _others(self) -> list[tuple[int, dict]]:
        out = []
        for rank, beacon in _beacons(self.run):
            if (
                beacon.get("launch") == self.launch
                and beacon.get("host") != self.host
                and beacon.get("local_rank") == 0
            ):
                out.append((rank, beacon))
        return out

    def dead(self) -> str | None:
        now = time.monotonic()
        for rank, beacon in self._others():
            beat = _beat_of(self.run, rank)
            last, since = self._seen.get(rank, (None, now))
            if rank not in self._seen or beat != last:
                self._seen[rank] = (beat, now)
            elif now - since >= self.stale_s:
                return _message(
                    f"rank {rank} (host {beacon.get('host')}, pid {beacon.get('pid')}) stopped "
                    f"answering: no heartbeat for {now - since:.0f} s",
                    self.run,
                )
        return None


def _write_failure(run: RunDir, message: str) -> None:
    try:
        RunFailure(error=message).write(run.path)
    except OSError:
        pass


def _within(seconds: float, probe, every: float = 0.1):
    """probe() every `every` seconds until it gives something true, for at most `seconds`; its
    last answer."""
    deadline = time.monotonic() + seconds
    while not (found := probe()) and time.monotonic() < deadline:
        time.sleep(every)
    return found


def _message(what: str, run: RunDir) -> str:
    if run.last.exists():
        return f"{what}; every rank stopped. Rerun the same command to resume from {run.last}"
    return f"{what}; every rank stopped, no checkpoint had been written yet"


def _started_by_rank_zero() -> bool:
    """Whether this rank's parent is rank 0 (Lightning's subprocess launcher), not torchrun or
    srun, whose ranks have an agent or SLURM for a parent."""
    return "TORCHELASTIC_RUN_ID" not in os.environ and "SLURM_STEP_ID" not in os.environ


def _beacon(run: RunDir, rank: int, launch: str, local_rank: int = 0) -> None:
    """This rank's beacon (`.ranks/RANK`) and its heartbeat (`.ranks/RANK.beat`, beaten every
    BEAT_S by a daemon thread), both removed when the process exits normally."""
    path, beat = run.ranks / str(rank), run.ranks / f"{rank}{BEAT}"
    run.ranks.mkdir(parents=True, exist_ok=True)
    mine = os.getpid()
    write_text(
        path,
        json.dumps(
            {
                "host": socket.gethostname(),
                "pid": mine,
                "ppid": os.getppid(),
                "local_rank": local_rank,
                "launch": launch,
            }
        ),
    )
    beat.unlink(missing_ok=True)  # a beat an earlier launch left; never written through a link
    fd = os.open(beat, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    stop = threading.Event()

    def beating() -> None:
        count = 0
        while True:
            count += 1
            try:  # in place, one fixed-width write: a reader on another host opens it afresh
                os.pwrite(fd, f"{count:020d}\n".encode(), 0)
            except OSError:
                return
            if stop.wait(BEAT_S):
                return

    threading.Thread(target=beating, name="zoo-heartbeat", daemon=True).start()

    def remove() -> None:
        stop.set()
        if (_beacon_of(run, rank) or {}).get("pid") == mine:
            path.unlink(missing_ok=True)
            beat.unlink(missing_ok=True)

    atexit.register(remove)


def _beacon_of(run: RunDir, rank: int) -> dict | None:
    try:
        beacon = json.loads((run.ranks / str(rank)).read_text())
    except (OSError, ValueError):
        return None
    return beacon if isinstance(beacon, dict) else None


def _beat_of(run: RunDir, rank: int) -> str | None:
    try:
        return (run.ranks / f"{rank}{BEAT}").read_text()
    except OSError:
        return None


def _beacons(run: RunDir) -> list[tuple[int, dict]]:
    if not run.ranks.is_dir():
        return []
    out = []
    for path in run.ranks.iterdir():
        if path.name.isdigit() and (beacon := _beacon_of(run, int(path.name))) is not None:
            out.append((int(path.name), beacon))
    return sorted(out, key=lambda item: item[0])


def _peers(run: RunDir, rank: int, launch: str | None) -> list[tuple[int, int]]:
    """(rank, pid) of the other ranks of this launch on this host."""
    host = socket.gethostname()
    return [
        (other, beacon["pid"])
        for other, beacon in _beacons(run)
        if other != rank
        and beacon.get("host") == host
        and beacon.get("launch") == launch
        and isinstance(beacon.get("pid"), int)
    ]


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
