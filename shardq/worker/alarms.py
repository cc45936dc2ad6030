"""Wake-up calls for the tasks this worker parked: a claimer is pointed at a parked task's
bucket when the task comes due, as an enqueue's NOTIFY would point it.

A parked durable task stands in line at its wake-up time, and a claimer that found its
bucket empty visits it again within ``poll_max_ms`` only: without a call at the due
time, a sleep would end up to that much late.  Any worker may claim the task; the one
that parked it knows when, so it calls.  The calls are kept in a heap, due soonest
first; those due beyond :data:`HORIZON_S`, and any past :data:`MOST` waiting, are left
to polling.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from shardq.core.loop import Loop

HORIZON_S = 3600.0
"""Parks due later than this are left to the claimers' polling."""
MOST = 100_000
"""Calls kept at most: a burst of parks beyond it is left to polling."""
IDLE_S = 60.0  # the wait when no call is kept (an add wakes the loop)
SLACK_S = 0.02
"""Calls are made this late: a server whose clock is a little behind the worker's would
not yet count the task due, and its bucket would then cool down to ``poll_max_ms``."""


class Alarms(Loop[int]):
    """Calls ``hear(queue, bucket)`` when each added park comes due; ``run_once`` makes
    the calls due now and returns how many."""

    def __init__(self, hear: Callable[[str, int], None],
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__("shardq-alarms", IDLE_S)
        self.hear, self.clock = hear, clock
        self._heap: list[tuple[float, int, str, int]] = []
        self._order = itertools.count()  # ties keep their order, and never compare names
        self._lock = threading.Lock()

    def add(self, due: float, queue: str, bucket: int) -> bool:
        """Call for a task of ``queue`` in ``bucket`` at ``due`` (Unix time); False when it
        is left to polling (too far off, or too many kept)."""
        if due - self.clock() > HORIZON_S:
            return False
        with self._lock:
            if len(self._heap) >= MOST:
                return False
            first = not self._heap or due < self._heap[0][0]
            heapq.heappush(self._heap, (due + SLACK_S, next(self._order), queue, bucket))
        if first:  # the loop waits for a later call, or none
            self.wake()
        return True

    def parked(self, parks: list[tuple[str, int, float | None]]) -> None:
        """Tasks parked (queue, bucket, when due: None for now): call for those due now
        at once, and keep a call for the others."""
        for queue, bucket, due in parks:
            if due is None:
                self.hear(queue, bucket)
            else:
                self.add(due, queue, bucket)

    def run_once(self) -> int:
        """Make every call that is due."""
        now, due = self.clock(), []
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                due.append(heapq.heappop(self._heap))
        for _, _, queue, bucket in due:
            self.hear(queue, bucket)
        return len(due)

    def delay_after(self, result: int) -> float:
        """Until the next call, or :data:`IDLE_S` when none is kept."""
        with self._lock:
            nearest = self._heap[0][0] if self._heap else None
        return IDLE_S if nearest is None else max(0.0, min(IDLE_S, nearest - self.clock()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)
