"""A background loop around a ``run_once()`` step, stopped by an event.

Every background part of a worker (claimers, heartbeat, completer, janitor, vacuum
step, stats sampler, periodic schedules) is one of these, so they all fail the same
way.  A step that raises is retried after the loop's interval, then ever later while
the failures go on: the wait doubles from the second failure in a row up to
:data:`MAX_BACKOFF_S`, with jitter, so that a fleet of workers does not hammer a
database that is down or has lost its schema, and does not retry in step.

The log says so once, not at every retry.  A failure that is a state of the
database rather than a bug (:data:`EXPECTED`: no schema, no connection, a full disk)
is one line without a traceback, and one line for the whole process, whichever loops
hit it;
any other failure is logged with its traceback.  Either is told again at most every
:data:`RETELL_S` while it lasts, with the count of the failures left out, and a loop
that told of a failure says when it recovered.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from shardq.core.errors import ConnectionLost, DiskFull, SchemaNotReady, Unavailable
from shardq.core.lograte import RateLimit

log = logging.getLogger("shardq")

R = TypeVar("R")

MAX_BACKOFF_S = 30.0
"""The longest wait between retries of a failing step (or the loop's interval, if longer)."""
MIN_GROWTH_S = 0.5  # the backoff doubles from at least this, whatever the interval
JITTER = 0.5  # a wait past the interval is cut by up to this fraction, at random
RETELL_S = 60.0
"""How often a failure that goes on is logged again."""
EXPECTED: tuple[type[Exception], ...] = (SchemaNotReady, Unavailable, ConnectionLost, DiskFull)
"""Failures that are a state of the database, not a bug: logged on one line."""

# Process-wide, so that many loops (or many claimers) failing the same way write one
# line between them.
_told = RateLimit(RETELL_S)


class Loop(ABC, Generic[R]):
    """Runs :meth:`run_once` every ``interval_s`` in a thread until stopped.

    ``start`` and ``stop`` are idempotent.  The wait between steps ends early on
    :meth:`wake` or :meth:`stop`, so stopping never waits for a full interval.  A
    step that raises is logged and retried with backoff (see the module's docstring);
    a wake does not cut that wait short, a stop does.
    """

    max_backoff_s = MAX_BACKOFF_S
    """The longest wait between retries of a failing step (at least ``interval_s``)."""

    def __init__(self, name: str, interval_s: float) -> None:
        self.name = name
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._failures = 0  # steps failed in a row
        self._failing_since = 0.0
        self._told_failure = False  # whether this loop logged a failure of the current run

    @abstractmethod
    def run_once(self) -> R:
        """Do one step and return what it did."""

    def delay_after(self, result: R) -> float:
        """Seconds to wait after a step; subclasses may shorten it when there is more work."""
        return self.interval_s

    def backoff_s(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed step in a row: the interval
        after the first, then doubling (jittered, never below the interval) up to
        ``max_backoff_s``."""
        if failures <= 1:
            return self.interval_s
        grown = max(self.interval_s, MIN_GROWTH_S) * 2.0 ** min(failures - 1, 32)
        capped = min(grown, max(self.max_backoff_s, self.interval_s))
        return max(self.interval_s, capped * (1 - JITTER * random.random()))

    def start(self) -> None:
        """Start the loop's thread (no-op if it runs)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._wake.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float | None = None) -> None:
        """Ask the loop to stop and wait for the current step to end (no-op if stopped)."""
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def wake(self) -> None:
        """End the current wait early: there may be work."""
        # Handler slots call this for every task they finish while the loop is behind:
        # setting a set Event still takes its lock.  Skipping is safe: the flag is
        # cleared before a step, so a set one means the next step is yet to begin.
        if not self._wake.is_set():
            self._wake.set()

    @property
    def running(self) -> bool:
        """Whether the loop's thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            # Cleared before the step, so a wake() that arrives during it is not lost.
            self._wake.clear()
            try:
                result = self.run_once()
            except Exception as exc:
                # A wake-up says there may be work, not that the failure is over: only
                # a stop ends this wait.
                self._stop.wait(self._failed(exc))
                continue
            self._succeeded()
            delay = self.delay_after(result)
            if delay > 0:
                self._wake.wait(delay)

    def _failed(self, exc: Exception) -> float:
        """Count and (rarely) log a failed step; returns how long to wait before the next."""
        self._failures += 1
        if self._failures == 1:
            self._failing_since = time.monotonic()
        delay = self.backoff_s(self._failures)
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        expected = isinstance(exc, EXPECTED)
        # An expected failure is one state of the database whichever loop meets it (and
        # whichever table it names); a bug is its loop's.
        key: tuple[object, ...] = (type(exc),) if expected else (self.name, type(exc), first)
        held = _told.allow(key)
        if held is None:
            return delay
        self._told_failure = True
        more = (f" ({held} more failure(s) like it not logged in the last {RETELL_S:g}s)"
                if held else "")
        if expected:
            log.warning("%s: %s; retrying in %.1fs, then less often (at most %gs apart)%s",
                        self.name, first, delay, max(self.max_backoff_s, self.interval_s),
                        more)
        else:
            log.error("%s: step failed; retrying in %.1fs, then less often%s", self.name,
                      delay, more, exc_info=exc)
        return delay

    def _succeeded(self) -> None:
        if self._failures and self._told_failure:
            log.warning("%s: recovered after %d failed step(s) in %.0fs", self.name,
                        self._failures, time.monotonic() - self._failing_since)
        self._failures = 0
        self._told_failure = False
