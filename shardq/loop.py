"""A background loop around a ``run_once()`` step, stopped by an event."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

log = logging.getLogger("shardq")

R = TypeVar("R")


class Loop(ABC, Generic[R]):
    """Runs :meth:`run_once` every ``interval_s`` in a thread until stopped.

    ``start`` and ``stop`` are idempotent.  The wait between steps ends early on
    :meth:`wake` or :meth:`stop`, so stopping never waits for a full interval.  A
    step that raises is logged and the loop goes on after the interval.
    """

    def __init__(self, name: str, interval_s: float) -> None:
        self.name = name
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @abstractmethod
    def run_once(self) -> R:
        """Do one step and return what it did."""

    def delay_after(self, result: R) -> float:
        """Seconds to wait after a step; subclasses may shorten it when there is more work."""
        return self.interval_s

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
                delay = self.delay_after(self.run_once())
            except Exception:
                log.exception("%s: step failed; retrying in %.1fs", self.name, self.interval_s)
                delay = self.interval_s
            if delay > 0:
                self._wake.wait(delay)
