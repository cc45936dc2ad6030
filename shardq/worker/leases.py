"""The leases a worker holds: every claimed task until its outcome is written.

Each task keeps the lease length it was claimed with, and is extended by that length
once a third of it has passed, so a long handler, a task waiting in the prefetch
buffer, or an outcome waiting for the completer keeps its lease while the worker is
alive.  The heartbeat ticks at a third of the shortest lease the worker claims with
and extends, in one statement, the tasks whose renewal comes due before its next
tick: a queue with a 3 s lease beside one with 300 s is extended every second, the
other every 100 s, and neither lapses.

When an extension finds a lease lost (the lease expired and another worker took the
task, or the task was cancelled or purged), the task's handler is told through its
context (async handlers are cancelled), its result will be discarded, and the loss
is logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from shardq.client import Client
from shardq.core.errors import LeaseLost
from shardq.core.loop import Loop
from shardq.core.task import Task
from shardq.handler import Context
from shardq.worker.metrics import Metrics

log = logging.getLogger("shardq.worker")

HEARTBEAT_FRACTION = 3  # extend at a third of the lease: two heartbeats may fail before expiry


@dataclass(eq=False, slots=True)
class Held:
    """A held task's context, the lease it was claimed with, and when to extend it."""

    context: Context
    lease_s: float
    renew_at: float
    """On the keeper's monotonic clock: a third of the lease after it last began."""


class LeaseKeeper(Loop[int]):
    """Tracks held tasks and extends their leases; ``run_once`` returns how many it extended.

    ``shortest_lease_s`` is the shortest lease the worker claims with: the heartbeat
    ticks at a third of it.  ``monotonic`` is the clock renewals are scheduled on.
    """

    # A failed heartbeat is tried again at the next tick, never later: backing off
    # would let the leases it failed to extend lapse.
    max_backoff_s = 0.0

    def __init__(self, client: Client, shortest_lease_s: float, metrics: Metrics, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 beat: Callable[[], None] | None = None, beat_every_s: float | None = None
                 ) -> None:
        # With ``beat`` (the worker's refresh of its row) the loop also ticks every
        # ``beat_every_s``, whatever the leases: a tick with no lease due writes nothing.
        interval = shortest_lease_s / HEARTBEAT_FRACTION
        if beat_every_s is not None:
            interval = min(interval, beat_every_s)
        super().__init__("shardq-heartbeat", interval)
        self.client, self.metrics, self.monotonic = client, metrics, monotonic
        self.beat = beat
        # Keyed by the Task object's identity: the same objects travel from the claim to
        # the outcome, and an int hashes in C where a UUID hashes in Python (three
        # lookups per task were a measurable share of a worker's time).  A held
        # context keeps its task alive, so no other object can take its id().
        self._held: dict[int, Held] = {}
        self._lock = threading.Lock()

    def hold(self, tasks: list[Task], lease_s: float, since: float) -> list[Context]:
        """Start tracking tasks claimed with ``lease_s`` by a claim sent at ``since`` (on
        the keeper's clock: their leases began no earlier); returns their contexts."""
        renew_at = since + lease_s / HEARTBEAT_FRACTION
        held = [Held(Context(task), lease_s, renew_at) for task in tasks]
        with self._lock:
            for entry in held:
                self._held[id(entry.context.task)] = entry
        return [entry.context for entry in held]

    def let_go(self, tasks: list[Task]) -> list[Task]:
        """Stop tracking tasks whose outcome is about to be written; returns those whose
        lease is still held (the others' outcomes must be dropped).

        Takes the lock, so an extension in flight finishes first: its statement and
        the outcome's never cross.
        """
        kept = []
        with self._lock:
            for task in tasks:
                entry = self._held.pop(id(task), None)
                if entry is not None and not entry.context.cancelled:
                    kept.append(task)
        return kept

    def run_once(self) -> int:
        """Extend, each by its own lease, the leases whose renewal comes due before the
        next tick; then the worker's beat, if any."""
        try:
            return self._extend()
        finally:
            if self.beat is not None:
                self.beat()

    def _extend(self) -> int:
        with self._lock:
            started = self.monotonic()
            horizon = started + self.interval_s
            due = [entry for entry in self._held.values() if entry.renew_at <= horizon]
            if not due:
                return 0
            lost: set[UUID] = set()
            try:
                self.client.extend_many([e.context.task for e in due], [e.lease_s for e in due])
            except LeaseLost as exc:
                lost = set(exc.task_ids)
            for entry in due:
                if entry.context.task.id in lost:
                    self._lose(entry)
                else:  # the new lease began no earlier than the statement was sent
                    entry.renew_at = started + entry.lease_s / HEARTBEAT_FRACTION
            return len(due) - len(lost)

    def _lose(self, entry: Held) -> None:
        context, task = entry.context, entry.context.task
        context.lose()
        self._held.pop(id(task), None)
        self.metrics.lease_lost.labels(task.queue).inc()
        log.warning("lease lost for task %s (queue %s, attempt %d): it was cancelled or purged, "
                    "or its lease expired and another worker took it; its result will be "
                    "discarded", task.id, task.queue, task.attempts,
                    extra={"task_id": task.id, "queue": task.queue, "attempt": task.attempts})
