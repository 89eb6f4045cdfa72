"""SIGTERM and SIGINT from the first line of zoo-train's main() to its last, wherever no run's
handler answers them (`interrupt.Interrupt` answers from the run's preparation to the end of
its final validation): the handler `answering` installs raises `Stopped` in the main thread at
once, and zoo-train ends with exit status 128 + the signal and one line. Once a run directory
is claimed (`claimed`), that stop also writes failed.json with the command that resumes, like
a stop in training; a run whose summary.json is written (`finished`) keeps its records as
they are. Before the claim nothing was written, and nothing is.

While the run's last records are written (`holding`), a signal waits until they are whole:
summary.json and the removal of an earlier failed.json are never split by a stop."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from zoo.training.signals.forks import parent_only

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
    """SIGTERM or SIGINT reached zoo-train outside a run's own handler. A BaseException, so that
    no `except Exception` on its way (Hydra's job, a sweep's arms) swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class Claim:
    """The run directory this command claimed, how to resume it, and how far the run came."""

    run_dir: Path
    resume: str
    stage: str = "while the run was starting"
    finished: bool = False


@dataclass
class _State:
    installed: bool = False
    claim: Claim | None = None
    holding: int = 0  # nested `holding` blocks
    pending: int | None = None  # a signal that came while holding


_STATE = _State()


@parent_only  # a pool's worker does not raise Stopped
def _handler(signum, frame) -> None:
    if _STATE.holding:
        _STATE.pending = _STATE.pending or signum
        return
    raise Stopped(signum)


@contextmanager
def answering() -> Iterator[None]:
    """Around the whole of zoo-train's main(): SIGTERM and SIGINT raise Stopped (in the main
    thread; elsewhere nothing changes). The previous handlers, and no claim, on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _handler) for signum in SIGNALS}
    _STATE.installed = True
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _STATE.installed, _STATE.claim, _STATE.holding, _STATE.pending = False, None, 0, None


def claimed(run_dir: Path, resume: str, finished: bool = False) -> None:
    """The command now holds `run_dir`: a stop from here writes its failed.json, naming `resume`
    (the command that resumes the run), unless the run is `finished` already. Called inside
    `holding` with the claim itself, so that no stop falls between the two."""
    if _STATE.installed:
        _STATE.claim = Claim(Path(run_dir), resume, finished=finished)


def stage(text: str) -> None:
    """Where the claimed run is, for the record of a stop (e.g. 'while the run's records were written')."""
    if _STATE.claim is not None:
        _STATE.claim.stage = text


def finished() -> None:
    """The claimed run's summary.json is written: a stop from here leaves its records as they are."""
    if _STATE.claim is not None:
        _STATE.claim.finished = True


def current() -> Claim | None:
    return _STATE.claim


@contextmanager
def holding() -> Iterator[None]:
    """A signal inside waits for the end of the block, where it raises Stopped."""
    _STATE.holding += 1
    try:
        yield
    finally:
        _STATE.holding -= 1
        if not _STATE.holding and _STATE.pending is not None:
            signum, _STATE.pending = _STATE.pending, None
            raise Stopped(signum)
