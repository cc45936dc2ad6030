"""Running suspect tasks alone.

A task whose last lease expired without a result may be what killed its worker (a
segfault, an OOM kill, ``os._exit`` in a library).  Run beside a batch, it takes the
batch down with it each time, and the healthy tasks burn their attempts with it.
So a worker that claims a suspect task gives the rest of that batch back at once
(without penalty), stops claiming, and runs the suspect only once no other handler
is running; then it resumes.  If the suspect kills the worker again, it dies alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Gate:
    """Handlers pass shared; a suspect passes exclusive, once no one else is inside.

    ``expect()`` announces suspects before they reach a slot, so that claimers pause
    (see :attr:`isolating`).  Tasks queued ahead of a suspect still run; once the
    suspect is at the gate, new shared entries wait until it has passed.
    """

    def __init__(self, on_clear: Callable[[], None] = lambda: None) -> None:
        # The Condition's own context manager is a Python call around the lock's: every
        # handler passes the gate twice, so the lock is taken directly.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._shared = 0
        self._expected = 0
        self._waiting = 0  # suspects at the gate
        self._exclusive = False
        self.on_clear = on_clear

    @property
    def isolating(self) -> bool:
        """Whether suspects are announced or running: claim nothing meanwhile."""
        with self._lock:
            return self._expected > 0

    def expect(self, n: int) -> None:
        """Announce ``n`` suspect tasks on their way to the slots."""
        with self._lock:
            self._expected += n

    def enter(self, exclusive: bool) -> None:
        """Pass the gate before a handler runs: alone when ``exclusive``.  Every entry
        is followed by one :meth:`leave` with the same ``exclusive``."""
        with self._lock:
            if exclusive:
                self._waiting += 1
                self._cond.wait_for(lambda: self._shared == 0 and not self._exclusive)
                self._waiting -= 1
                self._exclusive = True
            elif self._exclusive or self._waiting:
                self._cond.wait_for(lambda: not self._exclusive and self._waiting == 0)
                self._shared += 1
            else:  # the usual case, without building a predicate for every task
                self._shared += 1

    def leave(self, exclusive: bool) -> None:
        """Pass back out after the handler ran."""
        with self._lock:
            if exclusive:
                self._exclusive = False
                self._expected -= 1
                cleared = self._expected == 0
            else:
                self._shared -= 1
                cleared = False
            if cleared or exclusive or self._waiting:
                self._cond.notify_all()
        if cleared:
            self.on_clear()

    def forget(self, n: int) -> None:
        """``n`` announced suspects will not run (given back at shutdown)."""
        with self._lock:
            self._expected = max(0, self._expected - n)
            self._cond.notify_all()
