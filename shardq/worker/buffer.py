"""The prefetch buffer: claimed tasks waiting for a handler slot, oldest first.

Each entry remembers when it was put, so that tasks waiting longer than a bound can be
taken out and given back (:meth:`Buffer.take_older_than`): a task held in one worker's
buffer is locked, and another worker with idle slots cannot run it.
"""

from __future__ import annotations

import queue as queue_module
import threading
import time
from collections import deque
from collections.abc import Callable

from shardq.handler import Context


class Buffer:
    """A FIFO of handler contexts with the time each arrived; safe across threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._items: deque[tuple[float, Context]] = deque()
        # Taken directly where nothing waits: the Condition's context manager is a Python
        # call around the lock's, on the path of every task.
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)

    def put_many(self, contexts: list[Context]) -> None:
        """Add contexts at the end, in order (never blocks): one lock and one wake-up
        call for a claimed batch, not one per task."""
        now = self.clock()
        with self._lock:
            self._items.extend([(now, context) for context in contexts])
            self._ready.notify(len(contexts))

    def get(self, timeout: float) -> Context:
        """The oldest context, waiting up to ``timeout`` s for one; ``queue.Empty`` if none came."""
        with self._lock:
            if not self._items and not self._ready.wait_for(lambda: bool(self._items), timeout):
                raise queue_module.Empty
            return self._items.popleft()[1]

    def take_all(self) -> list[Context]:
        """Remove and return every waiting context."""
        with self._lock:
            taken = [context for _, context in self._items]
            self._items.clear()
        return taken

    def take_older_than(self, age_s: float) -> list[Context]:
        """Remove and return the contexts that arrived more than ``age_s`` s ago."""
        cutoff = self.clock() - age_s
        taken = []
        with self._lock:
            while self._items and self._items[0][0] < cutoff:  # oldest first: stop at a young one
                taken.append(self._items.popleft()[1])
        return taken

    def qsize(self) -> int:
        """How many contexts wait."""
        with self._lock:
            return len(self._items)

    def empty(self) -> bool:
        """Whether none waits."""
        return self.qsize() == 0
