"""Rate limits for log lines: a failure that repeats is written once a while, with a count."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

REPEAT_INTERVAL_S = 10.0
FORGET_AFTER = 6  # intervals after which a quiet key of a RateLimit is forgotten


class RateLimit:
    """At most ``burst`` log lines per key every ``interval_s``, counting the lines held back.

    A failure that repeats for every task of a queue (a missing handler, a database
    that is down) would otherwise write one line per task: thousands a second.  Keys
    quiet for a while are forgotten, so keys made from messages (which may hold ids)
    do not pile up in a long-running worker.
    """

    def __init__(self, interval_s: float = REPEAT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, *, burst: int = 1) -> None:
        self.interval_s, self.clock, self.burst = interval_s, clock, burst
        self._window: dict[Hashable, tuple[float, int]] = {}  # key: (began, lines let through)
        self._held: dict[Hashable, int] = {}
        self._pruned = clock()
        self._lock = threading.Lock()

    def allow(self, key: Hashable) -> int | None:
        """None to hold this line back; else how many lines of ``key`` were held back
        since the last one let through."""
        with self._lock:
            now = self.clock()
            self._prune(now)
            began, shown = self._window.get(key, (float("-inf"), 0))
            if now - began >= self.interval_s:
                began, shown = now, 0
            if shown >= self.burst:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._window[key] = (began, shown + 1)
            return self._held.pop(key, 0)

    def _prune(self, now: float) -> None:
        """Forget the keys whose window ended long ago (with their count, if any: a
        count of lines held back so long ago would mislead)."""
        if now - self._pruned < FORGET_AFTER * self.interval_s:
            return
        self._pruned = now
        for key in [k for k, (began, _) in self._window.items()
                    if now - began >= FORGET_AFTER * self.interval_s]:
            del self._window[key]
            self._held.pop(key, None)
