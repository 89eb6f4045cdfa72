"""zoo-train with a signal sent to itself at a named point (fault injection for the tests):
`python -m tests.cli.signal_at MODULE:QUALNAME WHEN SIGNAL zoo-train overrides...` sends SIGNAL
(TERM, INT) the first time the function MODULE.QUALNAME is called, just before it runs (WHEN
`before`) or just after it returns (`after`), then runs on as zoo-train does. Run it with -m
from the checkout's root, so that the checkout's zoo is the one imported."""

import functools
import importlib
import os
import runpy
import signal
import sys

TARGET, WHEN, SIGNUM = sys.argv[1], sys.argv[2], signal.Signals[f"SIG{sys.argv[3]}"]
module_name, qualname = TARGET.split(":")
owner = importlib.import_module(module_name)
*path, name = qualname.split(".")
for part in path:
    owner = getattr(owner, part)
original = getattr(owner, name)
sent: list[bool] = []


def _send() -> None:
    if not sent:
        sent.append(True)
        os.kill(os.getpid(), SIGNUM)


@functools.wraps(original)
def _signal_then_run(*args, **kwargs):
    if WHEN == "before":
        _send()
    result = original(*args, **kwargs)
    if WHEN == "after":
        _send()
    return result


setattr(owner, name, _signal_then_run)
sys.argv = ["zoo-train", *sys.argv[4:]]
runpy.run_module("zoo.cli.train", run_name="__main__", alter_sys=True)
