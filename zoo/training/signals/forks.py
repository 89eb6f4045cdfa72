"""A process forked by a command (a worker of a pool: the token shards tokenized in
`data.num_proc` processes, datasets' `map` with `num_proc`) does not answer a stop the way its
parent does. Its parent answers SIGTERM and Ctrl-C (zoo-train's run and command handlers,
every tool's `serve`) and ends its pools, whose workers a pool ends with SIGTERM: a worker that
kept the parent's handler raised the parent's exception there and printed its traceback, at the
end of a command that succeeded, and its signal reached the parent's watch
(`watch.SignalWatch`, through the wakeup descriptor it shares), which took it for a stop of the
run. A handler marked `parent_only` is replaced in a forked child as it starts: SIGTERM by its
default action (the process ends without a word), SIGINT ignored (Ctrl-C reaches the whole
process group, and the parent ends its workers), and the wakeup descriptor unset."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TypeVar

Handler = TypeVar("Handler", bound=Callable)

_PARENT_ONLY: set[Callable] = set()
_IN_CHILD = ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.SIG_IGN))


def parent_only(handler: Handler) -> Handler:
    """Mark `handler` (a function, or the function of a method) as a stop handler of the process
    that installs it, not of the processes it forks."""
    if not _PARENT_ONLY:
        os.register_at_fork(after_in_child=_in_child)
    _PARENT_ONLY.add(handler)
    return handler


def _in_child() -> None:
    inherited = False
    for signum, instead in _IN_CHILD:
        handler = signal.getsignal(signum)
        if getattr(handler, "__func__", handler) in _PARENT_ONLY:
            signal.signal(signum, instead)
            inherited = True
    if inherited:
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:  # forked from a thread other than the main one: none was set there
            pass
