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

    Every handler passes the gate twice, so a shared pass takes no lock while the gate
    is open: it adds itself to ``_inside`` (a list's append and pop are atomic), then
    looks whether the gate closed meanwhile, and if so steps back out and waits.  A
    suspect closes the gate under the lock and then waits for ``_inside`` to empty:
    whichever of the two looked first, the other sees it.
    """

    def __init__(self, on_clear: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._inside: list[None] = []  # one entry per shared handler inside
        self._closed = False  # a suspect waits at the gate or runs: shared entries wait
        self._expected = 0
        self._waiting = 0  # suspects at the gate
        self._exclusive = False
        self.on_clear = on_clear

    @property
    def isolating(self) -> bool:
        """Whether suspects are announced or running: claim nothing meanwhile."""
        return self._expected > 0

    def expect(self, n: int) -> None:
        """Announce ``n`` suspect tasks on their way to the slots."""
        with self._lock:
            self._expected += n

    def enter(self, exclusive: bool) -> None:
        """Pass the gate before a handler runs: alone when ``exclusive``.  Every entry
        is followed by one :meth:`leave` with the same ``exclusive``."""
        if exclusive:
            with self._lock:
                self._waiting += 1
                self._closed = True
                self._cond.wait_for(lambda: not self._inside and not self._exclusive)
                self._waiting -= 1
                self._exclusive = True
            return
        self._inside.append(None)
        if not self._closed:  # the usual case: no lock
            return
        self._inside.pop()  # a suspect is at the gate: let it pass first
        with self._lock:
            self._cond.notify_all()  # it may be waiting for this handler to step out
            self._cond.wait_for(lambda: not self._closed)
            self._inside.append(None)  # under the lock: no suspect can close the gate now

    def leave(self, exclusive: bool) -> None:
        """Pass back out after the handler ran."""
        if not exclusive:
            self._inside.pop()
            if self._closed:  # a suspect may be waiting for the last one out
                with self._lock:
                    self._cond.notify_all()
            return
        with self._lock:
            self._exclusive = False
            self._closed = self._waiting > 0
            self._expected -= 1
            cleared = self._expected == 0
            self._cond.notify_all()
        if cleared:
            self.on_clear()

    def forget(self, n: int) -> None:
        """``n`` announced suspects will not run (given back at shutdown)."""
        with self._lock:
            self._expected = max(0, self._expected - n)
            self._cond.notify_all()
