"""A worker a zoo command forks (a pool tokenizing the data) does not answer a stop as its
parent does (`zoo.training.signals.forks`): ended by its pool with SIGTERM, it ends without a
word, and its signal never reaches the parent's watch. Each case forks a pool whose two workers
sleep in their task, so that the pool's terminate() reaches them alive."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

POOL = textwrap.dedent("""
    def pool_ended_by_its_terminate():
        import multiprocessing as mp, time
        pool = mp.get_context("fork").Pool(2)
        pool.map_async(time.sleep, [60, 60])
        time.sleep(1)  # both workers asleep in their task
        pool.terminate()
        time.sleep(2)  # a watchdog started by the workers' signal ends the process within this
        print("the pool ended", flush=True)
""")

CASES = {
    # a run preparing its data, the watchdog's time cut to half a second
    "run": POOL
    + textwrap.dedent("""
        import sys
        import zoo.training.signals.interrupt as interrupt
        from zoo.training.checkpoint.saving import LastCheckpoint

        interrupt.HARD_EXIT_S = 0.5
        interrupt.last_words(lambda exc: print("last words:", exc, flush=True))
        with interrupt.Interrupt(LastCheckpoint(sys.argv[1], every_n_steps=100)).preparing():
            pool_ended_by_its_terminate()
    """),
    # zoo-train's command, before and after the run's own handler
    "command": POOL
    + textwrap.dedent("""
        from zoo.training.signals import command

        with command.answering():
            pool_ended_by_its_terminate()
    """),
    # every other tool (zoo-prepare's pool)
    "tool": POOL
    + textwrap.dedent("""
        from zoo.cli.tool import serve

        serve("zoo-x", lambda argv: pool_ended_by_its_terminate(), lambda: "", argv=[])
    """),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pools_workers_ended_by_sigterm_end_without_a_word(tmp_path, case):
    result = subprocess.run(
        [sys.executable, "-c", CASES[case], str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "the pool ended" in result.stdout and "last words" not in result.stdout
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert signal.Signals.SIGTERM.name not in result.stderr
