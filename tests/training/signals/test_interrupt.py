"""The signal handler of a run (zoo.training.signals.interrupt.Interrupt) against Lightning's own: a signal
that arrives while Lightning sets up, or between the end of fit and the final validation, is
recorded and ends the run with its checkpoint, never lost and never turned into status 0."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.training.checkpoint.saving import LastCheckpoint, RunRecord
from zoo.training.signals.interrupt import PREPARING, Interrupt, StopNow
from zoo.training.stops import TrainingInterrupted


class _Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.validated = 0  # validation batches run

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        self.validated += 1

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _Signal(L.Callback):
    """Sends this process SIGTERM `times` times from one Lightning hook, once, then spends
    `busy_s` seconds there (a step too long to reach its boundary)."""

    def __init__(self, hook: str, times: int = 1, busy_s: float = 0.0) -> None:
        self.sent = False

        def send(*args, **kwargs):
            if self.sent:
                return
            self.sent = True
            for _ in range(times):
                os.kill(os.getpid(), signal.SIGTERM)
            end = time.monotonic() + busy_s
            while time.monotonic() < end:
                time.sleep(0.01)

        setattr(self, hook, send)


def _fit(
    tmp_path, hook: str, max_steps: int = 4, grace_s=None, sender=None, **signal_args
) -> tuple[Interrupt, L.Trainer]:
    last = LastCheckpoint(tmp_path, every_n_steps=100)
    interrupt = Interrupt(last, grace_s=grace_s)
    before = signal.getsignal(signal.SIGTERM)
    trainer = L.Trainer(
        max_steps=max_steps,
        callbacks=[last, RunRecord(tmp_path), interrupt, sender or _Signal(hook, **signal_args)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        val_check_interval=3,
        num_sanity_val_steps=0,
        limit_val_batches=2,
    )
    data = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=1)
    interrupt.arm()
    try:
        trainer.fit(_Tiny(), data, data)
    finally:
        interrupt.disarm()
    assert signal.getsignal(signal.SIGTERM) == before  # given back as it was
    return interrupt, trainer


def test_a_signal_after_fit_ends_is_kept_for_the_final_validation(tmp_path):
    """Lightning puts back, when fit ends, the handler it found; a SIGTERM between that and the
    final validation used to reach a stale handler of Lightning's and vanish (the run went on to
    validate everything and exit 0)."""
    interrupt, trainer = _fit(tmp_path, "on_fit_end")
    assert trainer.global_step == 4 and interrupt.stopped_at is None  # training was over
    assert interrupt.received == signal.SIGTERM


def test_a_signal_while_lightning_sets_up_stops_at_the_first_step_with_a_checkpoint(tmp_path):
    """Lightning's handler is the one in place before training starts; on its own it ends the loop
    with a SystemExit of status 0. Here the signal is recorded and the first step boundary saves
    and stops."""
    interrupt, trainer = _fit(tmp_path, "on_fit_start")
    assert interrupt.signum == signal.SIGTERM and interrupt.stopped_at == 1
    assert torch.load(tmp_path / "last.ckpt", weights_only=False)["global_step"] == 1
    assert not trainer.received_sigterm  # Lightning's flag was taken over, it ends nothing


@pytest.mark.parametrize(
    "hook, step",
    [
        ("on_train_start", 1),
        ("on_train_batch_end", 2),  # sent after the handler's own check at step 1: the next is step 2
    ],
)
def test_a_signal_in_training_stops_at_the_next_step_boundary(tmp_path, hook, step):
    interrupt, trainer = _fit(tmp_path, hook, max_steps=6)
    assert interrupt.signum == signal.SIGTERM and interrupt.stopped_at == step == trainer.global_step


def test_a_signal_stop_runs_no_validation_first(tmp_path):
    """Lightning validates before an early stop (`should_stop`); a run stopped by a signal saves
    and ends without it (a whole validation could outlast the scheduler's grace period)."""
    interrupt, trainer = _fit(tmp_path, "on_train_batch_end", max_steps=6)  # validation due at step 3
    assert interrupt.stopped_at == 2 and trainer.lightning_module.validated == 0


def test_a_second_signal_stops_at_once(tmp_path):
    with pytest.raises(StopNow, match="a second time"):
        _fit(tmp_path, "on_train_batch_start", times=2)
    assert not (tmp_path / "last.ckpt").exists()  # nothing saved by the stop


def test_a_step_longer_than_the_grace_time_is_stopped_at_once(tmp_path):
    started = time.monotonic()
    with pytest.raises(StopNow, match=r"no step boundary within 0.3 s"):
        _fit(tmp_path, "on_train_batch_start", grace_s=0.3, busy_s=60)
    assert time.monotonic() - started < 30


_STUCK = r"""
import ctypes, os, signal, sys
from pathlib import Path
sys.path.insert(0, os.getcwd())
import zoo.training.signals.interrupt as interrupt_module
from tests.training.signals.test_interrupt import _fit
import lightning as L

interrupt_module.HARD_EXIT_S = 1.0
out = sys.argv[1]
interrupt_module.last_words(lambda exc: open(out + "/last_words.txt", "w").write(f"{exc.signum} {exc}"))


class Stuck(L.Callback):  # after the signal, one native call that restarts across signals
    def on_train_batch_start(self, trainer, *args):
        if trainer.global_step == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            ctypes.CDLL(None).system(b"sleep 60 >/dev/null 2>&1")  # glibc waits again after EINTR


_fit(Path(out), "on_train_batch_start", grace_s=0.5, sender=Stuck())
print("fit returned")
"""


@pytest.mark.slow
def test_a_process_stuck_in_one_native_call_ends_with_its_records(tmp_path):
    """A step that is one native call, longer than the grace time and blind to signals (here
    glibc's system(), which waits again after EINTR): the watchdog writes the run's last words
    and ends the process with 128 + the signal, seconds later, without waiting for the call."""
    import subprocess
    import sys

    started = time.monotonic()
    with open(tmp_path / "out.txt", "w") as out:  # files, not pipes: the shell of system() keeps pipes open
        proc = subprocess.Popen(
            [sys.executable, "-c", _STUCK, str(tmp_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[3],
        )
        code = proc.wait(timeout=120)
    took = time.monotonic() - started
    output = (tmp_path / "out.txt").read_text()
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert "fit returned" not in output
    words = (tmp_path / "last_words.txt").read_text()
    assert words.startswith(f"{int(signal.SIGTERM)} stopped by SIGTERM and no answer within 1.5 s"), words
    assert "holds step 1, the last one saved" in words or "no checkpoint had been written yet" in words, words
    assert took < 45, f"{took:.0f} s: the process waited for the native call"


@pytest.mark.parametrize("resumed", [False, True], ids=["new-run", "resumed-run"])
def test_a_signal_while_the_run_prepares_stops_it_at_once_with_its_records(tmp_path, resumed):
    """Before fit there is no step boundary to wait for: a SIGTERM during the preparation (here,
    a loop standing for a tokenizer's training) ends it at once as TrainingInterrupted, naming
    the checkpoint a resumed run started from (none for a new run), and the handlers are given
    back. Without it the process ended by the signal's default action, with no record."""
    last = LastCheckpoint(tmp_path, every_n_steps=100)
    if resumed:
        torch.save({"global_step": 7, "state_dict": {}, "hyper_parameters": {}}, last.path)
    interrupt = Interrupt(last, grace_s=60)
    before = signal.getsignal(signal.SIGTERM)
    prepared = []
    with pytest.raises(TrainingInterrupted) as stop:
        with interrupt.preparing():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Python answers at its next instruction
                time.sleep(0.001)
            prepared.append(True)
    assert not prepared  # the preparation did not go on
    assert stop.value.signum == signal.SIGTERM and stop.value.step == (7 if resumed else None)
    assert PREPARING in str(stop.value)
    assert ("holds step 7" if resumed else "no checkpoint had been written yet") in str(stop.value)
    assert signal.getsignal(signal.SIGTERM) == before


def test_once_fit_arms_a_signal_waits_for_the_step_boundary(tmp_path):
    """Inside `preparing`, fit's arm hands the signals to training: the signal is recorded, not raised."""
    interrupt = Interrupt(LastCheckpoint(tmp_path, every_n_steps=100))
    with interrupt.preparing():
        interrupt.arm()  # what fit does
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert interrupt.received == signal.SIGTERM


@pytest.mark.slow  # a process of its own, which the watchdog ends
def test_a_stop_answered_as_the_watchdog_fires_ends_once_with_the_watchdogs_words(tmp_path):
    """The main thread answers a stop just as the watchdog has begun to end the process: the
    watchdog's last words (the record and its one line) are said whole and the process ends with
    128 + the signal; the main thread waits in `disarm` instead of going on without the line
    (under load a run's stop was recorded with no line said)."""
    import threading

    from zoo.training.signals.interrupt import last_words

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the watchdog in its last words as the main thread disarms
        try:
            os.close(read)
            interrupt = Interrupt(LastCheckpoint(tmp_path / "checkpoints", every_n_steps=1), grace_s=1.0)
            interrupt.arm()

            def words(exc) -> None:
                os.write(write, b"last words\n")
                time.sleep(0.5)  # writing the record

            last_words(words)
            threading.Thread(target=interrupt._stuck, args=(signal.SIGTERM,), daemon=True).start()
            time.sleep(0.1)
            interrupt.disarm()
            os.write(write, b"disarm returned\n")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGTERM, said
    assert said == "last words\n"
