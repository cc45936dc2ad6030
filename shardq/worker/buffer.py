"""The prefetch buffer: claimed tasks waiting for a handler slot, oldest first.

Each entry remembers when it was put, so that tasks waiting longer than a bound can be
taken out and given back (:meth:`Buffer.take_older_than`): a task held in one worker's
buffer is locked, and another worker with idle slots cannot run it.
"""

from __future__ import annotations

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

    A put wakes one waiting getter, and a getter that woke and took a context wakes
    the next while more wait: a chain that stops as soon as the getters still running
    handlers, coming back for more, have taken the rest.  Waking one getter per context
    put (hundreds of slot threads, short handlers) woke threads that mostly found the
    buffer emptied by those coming back, and a worker's cost per task grew with its
    thread count.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.on_put: Callable[[], object] | None = None
        """Called after contexts were added (from the adding thread): how slots that do
        not wait on the buffer's condition learn of them."""
        self._items: deque[tuple[float, Context]] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._waiting = 0  # getters asleep on the condition
        self._closed = False

    def put_many(self, contexts: list[Context]) -> None:
        """Add contexts at the end, in order (never blocks), and wake one waiting getter
        (:meth:`wake`)."""
        now = self.clock()
        self._items.extend([(now, context) for context in contexts])
        self.wake()
        self._tell()

    def wake(self) -> None:
        """Wake one waiting getter if contexts wait: it takes one, and wakes the next
        while more wait (:meth:`get`).  Called after a put, and now and then by a
        claimer, in case the getters counted on to come back for what waits stay away
        (a handler far longer than the others).

        The count of waiting getters is read under the lock: a getter that found the
        buffer empty, under the lock, and has not yet counted itself would otherwise be
        missed, and go to sleep beside the contexts just put."""
        if self._items:
            with self._lock:
                if self._waiting:
                    self._ready.notify()

    def _tell(self) -> None:
        on_put = self.on_put
        if on_put is not None:
            on_put()

    def pop(self) -> Context:
        """The oldest context at once; ``IndexError`` when none waits."""
        return self._items.popleft()[1]

    def get(self) -> Context | None:
        """The oldest context, waiting for one as long as it takes; None once
        :meth:`close` was called.  A waiter sleeps until a put or the close: waking to
        look again on a timeout cost hundreds of idle threads a wake-up each, ten times
        a second."""
        woken = False
        while not self._closed:
            try:
                context = self._items.popleft()[1]
            except IndexError:
                pass
            else:
                if woken:  # pass the wake-up on while more wait
                    self.wake()
                return context
            with self._lock:
                if not self._items and not self._closed:  # else look again
                    self._waiting += 1
                    try:
                        self._ready.wait()
                    finally:
                        self._waiting -= 1
                    woken = True
        return None

    def close(self) -> None:
        """Wake every waiting getter and have each :meth:`get` return None from now on
        (the contexts stay in the buffer, for :meth:`take_all`)."""
        with self._lock:
            self._closed = True
            self._ready.notify_all()

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
