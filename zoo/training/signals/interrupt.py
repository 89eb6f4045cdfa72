"""SIGTERM and SIGINT end a run the way a scheduler's or a user's stop should: the handler only
records the signal; at the next optimizer-step boundary every rank agrees on it (any rank that
got it stops them all), `last.ckpt` is saved together and training stops. zoo-train then writes
failed.json with the reason and the command that resumes, and exits 128 + the signal's number
(143 for SIGTERM, 130 for SIGINT), without the validation Lightning runs before an early stop.
A second signal stops the run at once (`StopNow`), and so does the first when the next step
boundary has not come `callbacks.stop_grace_s` seconds later (a very long step or validation):
failed.json then names the last checkpoint written before, and the exit status is the same.
Python code answers that at once; a single native operation longer still (an attention matrix
far beyond memory bandwidth) cannot be interrupted, so HARD_EXIT_S seconds later the process
ends from a watchdog thread: the run's last words (`last_words`: failed.json, the one line)
are written and it exits with the same status, without waiting for the operation.

A signal during a validation inside fit ends it at the batch it was in: last.ckpt is saved as of
the validation's start (`ValidationDue`), so the resumed run runs that validation whole first,
at an epoch's last batch as anywhere else. The final validation (after fit,
for a run that ended between validations) listens too: a signal there ends it at the batch it
was in, the trained state is saved and the run ends the same way, never with status 0.

Ranks agree on a signal by a small all-reduce at each step boundary, and at each validation
batch that every rank has (their shares of the validation set can differ by a batch).

Before fit, while the run prepares (the tokenizer trained, the corpus tokenized into token
shards, the model built: `preparing`), there is no step boundary to wait for and nothing to
save: a signal ends the run at once, with the same records (failed.json, naming the checkpoint
a resumed run already had, or none; the one line with the command that resumes), and the same
exit status. Caches are written whole or not at all, so the next command prepares again what
was cut short. The handler cannot run while the main thread is inside a native call (a
tokenizer's training): a thread that learns of the signal at once (`watch.SignalWatch`) starts
the same watchdog, which ends the process with those records HARD_EXIT_S seconds later.

The handler is in place from the start of the run's preparation to the end of the final
validation, gaps included; before and after that the previous handlers apply: zoo-train's
(`command`), which end the command at once, with the same records once the run is claimed.
A SIGTERM that Lightning's own handler sees before training's first step (its sanity check)
ends the run at once too, where Lightning would exit with status 0."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import lightning as L
import torch

from zoo.training.checkpoint.saving import at_step_boundary
from zoo.training.signals.forks import parent_only
from zoo.training.signals.watch import SignalWatch
from zoo.training.stops import TrainingInterrupted

log = logging.getLogger("zoo")

SIGNALS = (signal.SIGTERM, signal.SIGINT)
HARD_EXIT_S = 10.0  # after the grace time: how long Python may take to answer before the process ends
PREPARING = "while the run was preparing (tokenizer, data, model)"  # why a stop before fit came at once

_LAST_WORDS: Callable[[BaseException], None] | None = None


def last_words(fn: Callable[[BaseException], None] | None) -> None:
    """What the watchdog calls before it ends a process stuck in native code: zoo-train's
    record of a stop (failed.json, the resume line); None: nothing."""
    global _LAST_WORDS
    _LAST_WORDS = fn


class ValidationStopped(Exception):
    """A signal arrived during a validation: it ends at the batch it was in."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopNow(BaseException):
    """A second signal, or a first one the next step boundary did not answer within the grace
    time: the run stops where it is, without saving. A BaseException (like KeyboardInterrupt), so
    that no `except Exception` on the way swallows it; unlike KeyboardInterrupt, Lightning passes
    it on instead of exiting with status 1."""

    def __init__(self, signum: int, why: str) -> None:
        super().__init__(f"{signal.Signals(signum).name} {why}")
        self.signum, self.why = signum, why


class Interrupt(L.Callback):
    def __init__(self, last, grace_s: float | None = None, due=None) -> None:
        self.last = last  # a LastCheckpoint
        self.due = due  # a ValidationDue: a stop inside a validation saves as of its start
        self._common_batches = 0  # validation batches every rank runs (the agreement points)
        self._val_batches = 0  # validation batches run so far in this validation
        self.grace_s = grace_s  # after the first signal, how long the next step boundary may take
        self.received: int | None = None  # the signal this process got
        self.signum: int | None = None  # the signal the run stopped for (agreed by all ranks)
        self.stopped_at: int | None = None  # the step it stopped at, saved in last.ckpt
        self._previous: dict = {}  # the handlers before `arm`
        self._final = False  # listening during the final validation
        self._late: str | None = None  # why the grace timer fired
        self._timer: threading.Timer | None = None
        # held by the watchdog from its decision to the process's end, and by `disarm`: a stop
        # the main thread answers as the watchdog fires is ended by one of them, never both
        self._ending = threading.Lock()
        self._preparing = False  # before fit: a signal stops the run at once
        self._watch = SignalWatch(self._prepare_watch)  # a signal seen while the main thread is in native code

    @parent_only  # not a forked worker's (the data's tokenizing pool): `forks`
    def _handler(self, signum, frame) -> None:
        if self._preparing:  # Python answers at once (a native call: `_prepare_watch` ends it)
            self.received = self.received or signum
            raise StopNow(signum, PREPARING)
        if self._late is not None:
            raise StopNow(self.received or signum, self._late)
        if self.received is not None:
            raise StopNow(signum, "a second time: stopping at once")
        self.received = signum
        if self.grace_s is not None and self._previous:
            self._timer = threading.Timer(self.grace_s, self._too_late, args=(signum,))
            self._timer.daemon = True
            self._timer.start()

    def _prepare_watch(self, signum: int) -> None:
        """From the watch's thread, as a signal arrives while the run prepares: the main thread
        may be inside a native call (a tokenizer's training), where the handler cannot run until
        it returns; HARD_EXIT_S seconds later the process ends with the run's records."""
        if not self._preparing or signum not in SIGNALS or self._timer is not None:
            return
        why = f"{PREPARING}, and no answer within {HARD_EXIT_S:g} s (one native call that long): ended at once"
        self._timer = threading.Timer(HARD_EXIT_S, self._stuck, args=(signum, why))
        self._timer.daemon = True
        self._timer.start()

    def _too_late(self, signum: int) -> None:
        """The grace time is over and the run is still going (a step or validation that long):
        the main thread gets the signal again, and this time stops at once."""
        if self._previous and self.stopped_at is None:
            self._late = f"and no step boundary within {self.grace_s:g} s (callbacks.stop_grace_s): stopping at once"
            self._timer = threading.Timer(HARD_EXIT_S, self._stuck, args=(signum,))
            self._timer.daemon = True
            self._timer.start()
            main = threading.main_thread().ident
            assert main is not None  # the main thread is running: it runs fit
            signal.pthread_kill(main, signum)

    def _stuck(self, signum: int, why: str | None = None) -> None:
        """Python has not answered the stop for HARD_EXIT_S more seconds: the main thread is
        inside one native operation. End the process from here, with the run's records. The lock
        is never given back: a main thread that answers now waits in `disarm` for the exit,
        instead of dropping the records' last words (its line) on the way out."""
        self._ending.acquire()
        if not self._previous or self.stopped_at is not None:
            self._ending.release()
            return  # the stop was answered (or fit is over)
        last, step = self._saved()
        if why is None:  # the grace timer's watch (`_too_late`): there is a grace time
            assert self.grace_s is not None
            why = (
                f"and no answer within {self.grace_s + HARD_EXIT_S:g} s (one operation that long): ended without saving"
            )
        log.error("%s %s", signal.Signals(signum).name, why)
        try:
            if _LAST_WORDS is not None:
                _LAST_WORDS(TrainingInterrupted(signum, step, last, why=f"{signal.Signals(signum).name} {why}"))
        finally:
            logging.shutdown()
            os._exit(128 + signum)

    def _saved(self):
        """The checkpoint a record of a stop names and its step (`LastCheckpoint.latest`: last.ckpt,
        else the latest best-STEP one; step None: none, or none readable)."""
        try:
            return self.last.latest()
        except Exception:  # noqa: BLE001 - a record must still be written
            return self.last.path, None

    def arm(self) -> None:
        """Take SIGTERM and SIGINT for the whole of fit and the final validation. Called before
        Lightning's fit, so that Lightning keeps this handler in its own chain while it sets up and
        puts it back when fit ends: a signal in any gap is recorded, never lost. Armed already
        (`preparing`), the handler stays and from now on waits for a step boundary."""
        self._preparing = False
        self._watch.stop()
        if self._previous:
            return
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handler)

    @contextmanager
    def preparing(self) -> Iterator[None]:
        """Around the run from its first build step to its end: until fit arms the handler for
        training, a signal ends the run at once as TrainingInterrupted (the checkpoint it names is
        the one a resumed run started from; none for a new run). The handlers are given back on
        the way out, however the run ended."""
        self.arm()
        self._preparing = True
        self._watch.start()
        try:
            yield
        except StopNow as exc:  # raised by the handler before fit (fit turns its own into TrainingInterrupted)
            if self._timer is not None:
                self._timer.cancel()
            log.info("%s: stopping", exc)
            saved, step = self._saved()
            raise TrainingInterrupted(exc.signum, step, saved, why=str(exc)) from None
        finally:
            self.disarm()

    def disarm(self) -> None:
        """Give the signals back to the handlers that were there before `arm` (after a watchdog
        that is ending the process: it ends it)."""
        with self._ending:
            self._final = self._preparing = False
            self._watch.stop()
            if self._timer is not None:
                self._timer.cancel()
            for signum, previous in self._previous.items():
                signal.signal(signum, previous)
            self._previous = {}

    def on_train_start(self, trainer, pl_module) -> None:
        # Lightning's own SIGTERM handler ends its loops with status 0 and no checkpoint: this one
        # alone answers during training; a SIGTERM that Lightning saw while setting up is ours now
        for signum in SIGNALS:
            signal.signal(signum, self._handler)
        connector = getattr(trainer, "_signal_connector", None)
        if connector is not None and getattr(connector, "received_sigterm", False):
            connector.received_sigterm = False
            self.received = self.received or signal.SIGTERM

    def listen(self) -> None:
        """The final validation (run after fit) stops at the batch a signal arrived in, or at its
        first batch for a signal that arrived since training ended (`ValidationStopped`)."""
        self._final = True

    def done_listening(self) -> None:
        self._final = False

    def on_validation_start(self, trainer, pl_module) -> None:
        self._val_batches = 0
        mine = sum(int(n) if n != float("inf") else 2**31 for n in trainer.num_val_batches)
        if trainer.world_size > 1:  # one collective per validation: how many batches all ranks have
            mine = int(trainer.strategy.reduce(torch.tensor(mine, device=pl_module.device), reduce_op="min"))
        self._common_batches = mine

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._val_batches += 1
        inside_fit = not self._final and self.due is not None and self.due.can_stop_inside(trainer)
        if not (self._final or inside_fit) or self.stopped_at is not None:
            return
        if self._val_batches > self._common_batches:
            return  # a batch other ranks may not have: no collective here
        mine = self._agreed(trainer, pl_module)
        if not mine:
            return
        if inside_fit:
            log.info(
                "%s during the validation at step %d: saving %s as of its start and stopping",
                signal.Signals(mine).name,
                trainer.global_step,
                self.last.path,
            )
            self.due.save_before_validation(trainer, self.last)
            self.signum, self.stopped_at = mine, trainer.global_step
        raise ValidationStopped(mine)

    def _agreed(self, trainer, pl_module) -> int:
        """The largest signal any rank got (0: none), by one small all-reduce when there are
        several ranks; every rank calls it at the same point."""
        mine = int(self.received or 0)
        if trainer.world_size > 1:
            mine = int(trainer.strategy.reduce(torch.tensor(mine, device=pl_module.device), reduce_op="max"))
        return mine

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not at_step_boundary(trainer) or self.stopped_at is not None:
            return
        mine = self._agreed(trainer, pl_module)
        if not mine:
            return
        log.info(
            "%s: saving %s at step %d and stopping", signal.Signals(mine).name, self.last.path, trainer.global_step
        )
        self.last.save(trainer)
        self.signum, self.stopped_at = mine, trainer.global_step
        trainer.should_stop = True
        trainer.limit_val_batches = 0  # Lightning validates before an early stop: not for a signal
