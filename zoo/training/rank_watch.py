"""The death of one rank ends every rank, with a record naming it.

Lightning's subprocess launcher starts ranks 1..N-1 as children of rank 0. When a child dies,
Lightning's own observer SIGKILLs everyone 5 s later, leaving no word; when rank 0 dies, the
children wait in their next collective until its timeout (30 minutes with gloo). `RankWatch`
closes both gaps: rank 0 polls its children every `POLL_S` and, when one has died, writes
failed.json naming it and ends the run; every other rank polls its parent and, when rank 0 is
gone, writes failed.json naming rank 0 and exits. Both exit status 1 (a run that could not go
on); the same command resumes from the last checkpoint."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import lightning as L

from zoo.config.atomic import write_text
from zoo.config.rundir import RunDir

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

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Watch during fit and during the final validation (each a setup ... teardown)."""
        if (self._thread is not None and self._thread.is_alive()) or trainer.world_size < 2:
            return
        self._stop = threading.Event()
        procs = getattr(trainer.strategy.launcher, "procs", None)  # Lightning's subprocess launcher
        if trainer.global_rank == 0 and procs:
            target, args = self._watch_children, (list(procs),)
        elif trainer.global_rank > 0 and os.environ.get("LOCAL_RANK") and _started_by_rank_zero():
            target, args = self._watch_parent, (os.getppid(), trainer.global_rank)
        else:
            return
        self._thread = threading.Thread(target=target, args=args, name="zoo-rank-watch", daemon=True)
        self._thread.start()

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self._stop.set()

    def _watch_children(self, procs) -> None:
        while not self._stop.wait(POLL_S):
            for rank, proc in enumerate(procs, start=1):
                code = proc.poll()
                if code is None or code == 0:
                    continue
                if self._stop.is_set():  # the run is ending anyway (a stop, an error reported)
                    return
                self._end(f"rank {rank} (pid {proc.pid}) {_death(code)}", rank)
                for other in procs:
                    if other.poll() is None:
                        other.kill()
                os._exit(EXIT_STATUS)

    def _watch_parent(self, parent: int, rank: int) -> None:
        while not self._stop.wait(POLL_S):
            if os.getppid() == parent:
                continue
            # reparented: rank 0 is gone. Having written the run's record first, it ended the run
            # (a finish, a stop or an error it reported): this rank only follows it
            for record in (self.run.summary, self.run.failed):
                if record.exists() and record.stat().st_mtime >= self._started:
                    os._exit(0 if record == self.run.summary else EXIT_STATUS)
            self._end(f"rank 0 (pid {parent}) ended without a word; rank {rank} stopped too", 0)
            os._exit(EXIT_STATUS)

    def _end(self, what: str, rank: int) -> None:
        message = f"{what}; every rank stopped. Rerun the same command to resume from {self.run.last}" \
            if self.run.last.exists() else f"{what}; every rank stopped, no checkpoint had been written yet"
        log.error(message)
        try:
            write_text(self.run.failed, json.dumps({"status": "failed", "error": message, "rank": rank,
                                                     "time": time.time()}, indent=1))
        except OSError:
            pass
        print(f"zoo-train: error: {message}", file=sys.stderr, flush=True)


def _started_by_rank_zero() -> bool:
    """Whether this rank's parent is rank 0 (Lightning's subprocess launcher), not torchrun or
    srun, whose ranks have an agent or SLURM for a parent."""
    return "TORCHELASTIC_RUN_ID" not in os.environ and "SLURM_STEP_ID" not in os.environ
