"""A worker's row in ``shardq.workers``: written at start, refreshed by the heartbeat,
deleted on a clean stop (see :mod:`shardq.ops.workers`).

The refresh rides on the lease keeper's loop, which ticks at least every quarter of
``worker_stale_s``; it writes at most that often, so a busy heartbeat adds no
statements, unless the worker's layout generation changed (a claimer that notices
wakes the loop): a reshard waits for every live worker to claim with the new one.  A
refresh that fails is logged and tried at the next tick: it must never hold up the
extension of leases.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from uuid import UUID, uuid4

from shardq.client import Client
from shardq.ops import workers

log = logging.getLogger("shardq.worker")

REFRESHES_PER_STALE = 4  # a worker is stale after missing this many refreshes


class Presence:
    """One worker process's identity (``id``, ``name``, ``host``, ``pid``) and its row."""

    def __init__(self, client: Client, queues: Sequence[str], name: str | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client, self.queues, self.monotonic = client, list(queues), monotonic
        self.id: UUID = uuid4()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.name = name or f"{self.host}:{self.pid}"
        self.every_s = client.config.worker_stale_s / REFRESHES_PER_STALE
        self._seen_at = float("-inf")
        self._generation: int | None = None

    def register(self) -> None:
        """Write the row (or move its ``last_seen_at``) now, with the layout generation
        the worker claims with."""
        self._generation = self.client.statements.layout.generation
        self.client.perform(workers.register(self.client.statements, self.id, self.name,
                                             self.host, self.pid, self.queues))
        self._seen_at = self.monotonic()

    def beat(self) -> None:
        """Refresh the row if a refresh is due, or the worker claims with a new layout
        generation (a reshard waits for every worker's); a failure is logged, not
        raised."""
        current = self.client.statements.layout.generation == self._generation
        if current and self.monotonic() - self._seen_at < self.every_s:
            return
        try:
            self.register()
        except Exception as exc:  # the next tick tries again; leases come first
            log.warning("could not refresh worker %s in shardq.workers: %s", self.name, exc)

    def leave(self) -> None:
        """Delete the row (a clean stop); a failure leaves it to the janitor."""
        try:
            self.client.perform(workers.remove(self.client.statements, self.id))
        except Exception as exc:
            log.warning("could not remove worker %s from shardq.workers (the janitor will, "
                        "after worker_stale_s): %s", self.name, exc)
