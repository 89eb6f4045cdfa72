"""Learning of a signal at once, even while the main thread is inside one long native call.

Python runs a signal's handler in the main thread, between two of its instructions: while the
main thread is inside a native call (a SentencePiece tokenizer's training, minutes on a large
corpus), the handler waits for the call to return, and nothing the handler would start (a
watchdog) starts either. The C-level handler writes the signal's number to the file descriptor
given to `signal.set_wakeup_fd` as it arrives; `SignalWatch` reads that descriptor in a thread
of its own and calls `on_signal(signum)` there, at once."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable


class SignalWatch:
    """`start()` in the main thread, with Python handlers installed for the signals to watch;
    `stop()` puts the previous wakeup descriptor back and ends the thread."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self.on_signal = on_signal
        self._pair: tuple[socket.socket, socket.socket] | None = None
        self._previous_fd = -1
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._pair is not None:
            return
        read, write = socket.socketpair()
        write.setblocking(False)  # the C handler must never block on a full buffer
        self._previous_fd = signal.set_wakeup_fd(write.fileno(), warn_on_full_buffer=False)
        self._pair = (read, write)
        self._thread = threading.Thread(target=self._read, args=(read,), name="zoo-signal-watch", daemon=True)
        self._thread.start()

    def _read(self, read: socket.socket) -> None:
        while True:
            try:
                data = read.recv(64)
            except OSError:  # closed by stop()
                return
            if not data:
                return
            for signum in data:
                self.on_signal(signum)

    def stop(self) -> None:
        if self._pair is None:
            return
        read, write = self._pair
        self._pair = None
        current = signal.set_wakeup_fd(self._previous_fd)
        if current != write.fileno():  # another one set since: it stays
            signal.set_wakeup_fd(current)
        write.close()  # the reader sees the end of the stream
        if self._thread is not None:
            self._thread.join(timeout=5)
        read.close()
