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
    """A FIFO of handler contexts with the time each arrived; safe across threads.

    Taking and counting need no lock: a deque's append, popleft and len are each
    atomic.  On two cores, four handler threads and the claimers taking one lock for
    every task made it contended, and every contended acquire is a sleep and a wake-up
    in the kernel.  The lock is there for waiting while the buffer is empty: a getter
    looks again under it before it waits, and a put notifies under it after adding,
    so no put is missed.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.on_put: Callable[[], object] | None = None
        """Called after contexts were added (from the adding thread): how slots that do
        not wait on the buffer's condition learn of them."""
        self._items: deque[tuple[float, Context]] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)

    def put_many(self, contexts: list[Context]) -> None:
        """Add contexts at the end, in order (never blocks): one wake-up call for a
        claimed batch, not one per task."""
        now = self.clock()
        self._items.extend([(now, context) for context in contexts])
        with self._lock:
            self._ready.notify(len(contexts))
        self._tell()

    def _tell(self) -> None:
        on_put = self.on_put
        if on_put is not None:
            on_put()

    def pop(self) -> Context:
        """The oldest context at once; ``IndexError`` when none waits."""
        return self._items.popleft()[1]

    def get(self, timeout: float) -> Context:
        """The oldest context, waiting up to ``timeout`` s for one; ``queue.Empty`` if none came."""
        deadline = None
        while True:
            try:
                return self._items.popleft()[1]
            except IndexError:
                pass
            if deadline is None:
                deadline = time.monotonic() + timeout
            left = deadline - time.monotonic()
            if left <= 0:
                raise queue_module.Empty
            with self._lock:
                if not self._items:  # else another getter may take it first: look again
                    self._ready.wait(left)

    def take_all(self) -> list[Context]:
        """Remove and return every waiting context."""
        taken = []
        while True:
            try:
                taken.append(self._items.popleft()[1])
            except IndexError:
                return taken

    def take_older_than(self, age_s: float) -> list[Context]:
        """Remove and return the contexts that arrived more than ``age_s`` s ago."""
        cutoff = self.clock() - age_s
        taken: list[Context] = []
        while True:  # oldest first: stop at a young one
            try:
                entry = self._items.popleft()
            except IndexError:
                return taken
            if entry[0] >= cutoff:
                self._items.appendleft(entry)  # back at the front, where it was
                with self._lock:  # a getter may have found it gone meanwhile and waits
                    self._ready.notify()
                self._tell()
                return taken
            taken.append(entry[1])

    def qsize(self) -> int:
        """How many contexts wait."""
        return len(self._items)

    def empty(self) -> bool:
        """Whether none waits."""
        return not self._items
