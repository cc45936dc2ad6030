"""Signals that stop a command, turned into a :class:`threading.Event` without a lock
taken in a signal handler.

A Python signal handler runs in the main thread between two bytecodes, wherever that
thread is.  If it is inside ``Event.wait`` of the very event the handler sets, it holds
the event's lock there, and ``Event.set`` in the handler waits for that lock for ever:
the process ignores every later SIGTERM and never stops (the Python documentation warns
against locks in signal handlers).  So the handler here only writes the signal's number
to a pipe, which takes no lock; a thread of its own reads it, calls ``on_signal`` and
sets the event.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a long-running command (Ctrl-C; systemd's and Kubernetes' stop)."""


@contextlib.contextmanager
def stop_on_signals(signals: Sequence[signal.Signals] = STOP_SIGNALS, *,
                    on_signal: Callable[[signal.Signals, int], object] | None = None
                    ) -> Iterator[threading.Event]:
    """Within the block, each of ``signals`` sets the event it yields instead of doing
    what it did before.  ``on_signal(signal, how many so far)`` is called first, in the
    thread that sets the event, where it may log, take locks or end the process.  The
    handlers from before are put back at the end.  Call it from the main thread."""
    stop = threading.Event()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def handler(signum: int, frame: FrameType | None) -> None:
        # A full pipe already holds more signals than anyone waits for.
        with contextlib.suppress(BlockingIOError):
            os.write(write_fd, bytes([signum]))

    def watch() -> None:
        seen = 0
        while data := os.read(read_fd, 64):  # empty once the block has closed the pipe
            for signum in data:
                seen += 1
                if on_signal is not None:
                    on_signal(signal.Signals(signum), seen)
                stop.set()

    watcher = threading.Thread(target=watch, name="shardq-signals", daemon=True)
    watcher.start()
    before = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield stop
    finally:
        for sig, previous in before.items():
            signal.signal(sig, previous)
        os.close(write_fd)
        watcher.join()
        os.close(read_fd)
