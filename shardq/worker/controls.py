"""What a worker knows of its queues' flow control, looked up at most once a second.

The cached :class:`~shardq.ops.flow.Control` only chooses how a claimer claims a
queue (a plain bucket claim, or a turn under limits and groups); the limits
themselves are read and kept by the claim statements, and a plain claim takes nothing
from a queue that became controlled.  So a stale view costs a second of empty claims
at worst, never a claim past a limit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from shardq.client import Client
from shardq.core.errors import ShardqError
from shardq.ops.flow import Control

log = logging.getLogger("shardq.worker")

REFRESH_S = 1.0


class Controls:
    """The worker's view of ``queues``' flow control (:meth:`get`), refreshed by the
    first caller that finds it older than ``refresh_s``."""

    def __init__(self, client: Client, queues: Sequence[str], *, refresh_s: float = REFRESH_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.queues = client, list(queues)
        self.refresh_s, self.clock = refresh_s, clock
        self._lock = threading.Lock()
        self._known: dict[str, Control] = {}
        self._at = -float("inf")

    def get(self, queue: str) -> Control:
        """``queue``'s flow control as last seen (no control until first seen)."""
        if self.clock() - self._at >= self.refresh_s and self._lock.acquire(blocking=False):
            try:
                self.refresh()
            finally:
                self._lock.release()
        return self._known.get(queue, NONE)

    def refresh(self) -> dict[str, Control]:
        """Look the queues up now; returns what was found.  A failed look keeps the last
        view (the claim statements keep the limits meanwhile) and is tried again after
        ``refresh_s``."""
        self._at = self.clock()
        try:
            self._known = self.client.controls(self.queues)
        except ShardqError as e:
            log.debug("could not read the queues' limits: %s", e)
        return self._known


NONE = Control()
