"""A signal reaches zoo while the main thread is inside one long native call
(zoo.training.signals.watch.SignalWatch): the thread that watches learns of it at once, and a
run stopped while it prepares (Interrupt.preparing) ends with its records HARD_EXIT_S seconds
later instead of when the call returns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from zoo.training.signals.watch import SignalWatch


def test_the_watch_learns_of_a_signal_while_the_main_thread_waits_and_puts_the_previous_fd_back():
    seen: list[int] = []
    arrived = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)  # a Python handler: the wakeup fd is written
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    watch = SignalWatch(lambda signum: (seen.append(signum), arrived.set()))
    try:
        watch.start()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert arrived.wait(5)
    finally:
        watch.stop()
        signal.signal(signal.SIGUSR1, previous)
    assert seen == [signal.SIGUSR1]
    assert signal.set_wakeup_fd(before) == before  # given back as it was


# a SentencePiece training (a native call that lets other threads run) on text of its own,
# SIGTERMed one second in; the watchdog's time is cut to half a second
STUCK = textwrap.dedent("""
    import io, os, random, signal, sys, threading, time
    import sentencepiece as spm
    import zoo.training.signals.interrupt as interrupt
    from zoo.training.checkpoint.saving import LastCheckpoint

    interrupt.HARD_EXIT_S = 0.5
    interrupt.last_words(lambda exc: print("last words:", exc, flush=True))
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(20000)]
    lines = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(40000)]
    stop = interrupt.Interrupt(LastCheckpoint(sys.argv[1], every_n_steps=100))
    threading.Timer(1.0, os.kill, args=(os.getpid(), signal.SIGTERM)).start()
    start = time.monotonic()
    with stop.preparing():
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=io.BytesIO(), vocab_size=4000,
                                       model_type="unigram", minloglevel=2, num_threads=1)
    print("the training returned after", round(time.monotonic() - start, 1), "s", flush=True)
""")


@pytest.mark.slow
def test_a_signal_during_a_native_call_of_the_preparation_ends_the_run_with_its_records(tmp_path):
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-c", STUCK, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 128 + signal.SIGTERM, result.stdout + result.stderr[-3000:]
    assert "the training returned" not in result.stdout  # ended inside the call, not after it
    assert "last words: stopped by SIGTERM while the run was preparing" in result.stdout
    assert "no answer within 0.5 s" in result.stdout and "no checkpoint had been written yet" in result.stdout
    assert time.monotonic() - start < 60
