"""The leases a worker holds: every claimed task until its outcome is written.

The heartbeat extends them all at a fraction of the lease, so a long handler, a
task waiting in the prefetch buffer, or an outcome waiting for the completer keeps
its lease while the worker is alive.
When an extension finds a lease lost, the task's handler is told through its
context (async handlers are cancelled) and its result will be discarded.
"""

from __future__ import annotations

import logging
import threading
from uuid import UUID

from shardq.client import Client
from shardq.errors import LeaseLost
from shardq.handler import Context
from shardq.loop import Loop
from shardq.task import Task
from shardq.worker.metrics import Metrics

log = logging.getLogger("shardq.worker")

HEARTBEAT_FRACTION = 3  # extend every lease_s / 3: two heartbeats may fail before expiry


class LeaseKeeper(Loop[int]):
    """Tracks held tasks and extends their leases; ``run_once`` returns how many it extended."""

    def __init__(self, client: Client, lease_s: float, metrics: Metrics) -> None:
        super().__init__("shardq-heartbeat", lease_s / HEARTBEAT_FRACTION)
        self.client, self.lease_s, self.metrics = client, lease_s, metrics
        # Keyed by the Task object's identity: the same objects travel from the claim to
        # the outcome, and an int hashes in C where a UUID hashes in Python (three
        # lookups per task were a measurable share of a worker's time).  A held
        # context keeps its task alive, so no other object can take its id().
        self._held: dict[int, Context] = {}
        self._lock = threading.Lock()

    def hold(self, tasks: list[Task]) -> list[Context]:
        """Start tracking freshly claimed tasks; returns their handler contexts."""
        contexts = [Context(task) for task in tasks]
        with self._lock:
            for context in contexts:
                self._held[id(context.task)] = context
        return contexts

    def let_go(self, tasks: list[Task]) -> list[Task]:
        """Stop tracking tasks whose outcome is about to be written; returns those whose
        lease is still held (the others' outcomes must be dropped).

        Takes the lock, so an extension in flight finishes first: its statement and
        the outcome's never cross.
        """
        kept = []
        with self._lock:
            for task in tasks:
                context = self._held.pop(id(task), None)
                if context is not None and not context.cancelled:
                    kept.append(task)
        return kept

    def run_once(self) -> int:
        """Extend every held lease to ``lease_s`` from now."""
        with self._lock:
            contexts = list(self._held.values())
            if not contexts:
                return 0
            try:
                self.client.extend_many([c.task for c in contexts], self.lease_s)
            except LeaseLost as lost:
                self._lose({i for i in lost.task_ids}, contexts)
                return len(contexts) - len(lost.task_ids)
            return len(contexts)

    def _lose(self, ids: set[UUID], contexts: list[Context]) -> None:
        for context in contexts:
            if context.task.id not in ids:
                continue
            context.lose()
            self._held.pop(id(context.task), None)
            self.metrics.lease_lost.labels(context.task.queue).inc()
            log.warning("lease lost for task %s (queue %s, attempt %d): its result will be "
                        "discarded", context.task.id, context.task.queue, context.task.attempts,
                        extra={"task_id": context.task.id, "queue": context.task.queue,
                               "attempt": context.task.attempts})
