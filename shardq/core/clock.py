"""Clocks.  shardq asks the clock for "now" and sends the answer with every statement.

The default, :class:`DatabaseClock`, answers ``None``: the statements then use the
database's own ``now()``, so every worker agrees on time whatever its host clock
says.  Tests inject a :class:`ManualClock` to drive leases and backoff
deterministically.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Tells the time that statements use for "now"."""

    def now(self) -> datetime | None:
        """The current time (timezone-aware), or None for the database's own now()."""
        ...


class DatabaseClock:
    """Use the database server's clock (the default)."""

    def now(self) -> datetime | None:
        """None: statements fall back to the database's now()."""
        return None


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The current manual time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward and return the new time."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now
