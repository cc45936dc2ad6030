"""Client-side deadlines for units of work on a connection.

A server that stops answering while the socket stays open (a half-open connection:
a dead middlebox, a frozen host, a network partition that still acknowledges TCP)
leaves a blocking driver call waiting forever; TCP keepalives do not help while the
peer's stack still acknowledges.  :class:`Watchdog` gives each unit of work a
deadline and, when it passes, shuts the connection's socket down.  The blocked call
then fails at once with a connection error, the connection is discarded, and the
caller's retry logic takes over as for any lost connection.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg


class Guard:
    """One unit of work under a deadline; ``cut`` says whether the deadline struck."""

    __slots__ = ("conn", "cut", "deadline")

    def __init__(self, conn: psycopg.Connection[Any], deadline: float) -> None:
        self.conn, self.deadline, self.cut = conn, deadline, False


def cut_socket(conn: psycopg.Connection[Any]) -> None:
    """Shut down the connection's socket so that any call blocked on it returns.

    Shutting down (rather than closing) leaves the descriptor to its owner, which
    closes it when it discards the connection; a duplicate is used so the owner's
    descriptor number is never freed under it.
    """
    try:
        fd = conn.pgconn.socket
    except psycopg.OperationalError:
        return  # already closed
    dup = os.dup(fd)
    try:
        with socket.socket(fileno=dup) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected any more: nothing is blocked on it


class Watchdog:
    """One thread that cuts the connections whose unit of work overran its deadline."""

    def __init__(self, name: str = "shardq-deadlines") -> None:
        self._name = name
        self._active: dict[int, Guard] = {}
        self._keys = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        # When the thread wakes next by itself (inf: only when told).  A new unit whose
        # deadline is later need not wake it: waking it for every statement, to find
        # nothing due, was a measurable share of a busy worker's time.
        self._wake_at = math.inf

    @contextmanager
    def guard(self, conn: psycopg.Connection[Any], timeout_s: float) -> Iterator[Guard]:
        """Run the body with ``conn`` cut after ``timeout_s`` seconds."""
        entry = Guard(conn, time.monotonic() + timeout_s)
        key = next(self._keys)
        with self._cond:
            self._active[key] = entry
            self._ensure_thread()
            if entry.deadline < self._wake_at:
                self._cond.notify()
        try:
            yield entry
        finally:
            with self._cond:
                self._active.pop(key, None)

    def cap(self, deadline: float) -> None:
        """Bring every running unit's deadline forward to ``deadline`` (a monotonic time)
        at the latest: work already under way ends by then too."""
        with self._cond:
            for entry in self._active.values():
                entry.deadline = min(entry.deadline, deadline)
            self._cond.notify()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for key, entry in list(self._active.items()):
                    if entry.deadline <= now:
                        # Under the lock: the guard's owner cannot have handed the
                        # connection back to its pool in the meantime.
                        del self._active[key]
                        entry.cut = True
                        cut_socket(entry.conn)
                if not self._active:
                    self._wake_at = math.inf
                    self._cond.wait()
                    continue
                self._wake_at = min(e.deadline for e in self._active.values())
                self._cond.wait(self._wake_at - now)
