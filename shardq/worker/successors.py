"""Successors: a freed running-limit slot is taken again in the ack's own transaction.

Under a running limit that claims wait for (:attr:`~shardq.ops.flow.Control.awaited`),
the completer writes an outcome at once, and the slot it frees would stay empty until
a claimer, woken by the write, claimed again.  Instead the acks of such a queue are
written by :func:`shardq.ops.handover.ack_and_claim`: one transaction that deletes
the finished tasks and claims their successors into the slots they held.  The
claimed tasks go straight into the buffer, as a claimer's would.  Only ungrouped
queues are handed on: a per-group slot belongs to one group, whose turn a claimer's
round of the groups decides.

The successors come from the queue's buckets in turn, not from the bucket of the task
they follow: that way each slot would keep to one bucket, drain it, and then wait for
a claimer's poll to find another (a second or so of an empty slot per bucket drained).
"""

from __future__ import annotations

import random
import threading
import time

from shardq.core import tracing
from shardq.core.errors import LeaseLost
from shardq.core.task import Task
from shardq.ops import handover
from shardq.ops.results import Kept
from shardq.worker.claimer import (
    ClaimSizes,
    Feeds,
    buffer_room,
    claim_size,
    deliver,
    observe_waits,
)


class Successors:
    """Writes the acks of a worker (``feeds``, claims sized by ``sizes``) whose queue's
    slots are awaited, with the claim of their successors."""

    def __init__(self, feeds: Feeds, sizes: ClaimSizes) -> None:
        self.feeds, self.sizes = feeds, sizes
        self._next: dict[str, int] = {}  # per queue, the bucket whose turn is next
        # Held while a handover runs; close() takes it, so that once it returns no
        # claim is in flight and none begins.
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """Claim no more successors (the worker stops: a task claimed now would wait in
        a buffer nobody empties, locked until its lease ran out); waits for a handover
        in flight."""
        with self._lock:
            self._closed = True

    def __call__(self, tasks: list[Task], kept: list[Kept | None]) -> int | None:
        """Ack ``tasks`` (keeping ``kept``) and claim their successors; returns how many
        were claimed, or None when these acks are not handed on (several queues, a
        queue whose slots nobody waits for, a grouped one, no room in the buffer, or
        the worker stopping): the caller then writes them as usual.  Raises
        LeaseLost, after the claimed tasks are in the buffer, for acks whose lease had
        ended."""
        with self._lock:
            return None if self._closed else self._hand_on(tasks, kept)

    def _hand_on(self, tasks: list[Task], kept: list[Kept | None]) -> int | None:
        feeds, sizes = self.feeds, self.sizes
        queue = tasks[0].queue
        # Every ack of a worker comes here: a queue whose slots nobody waits for (the
        # usual case) is told apart first, before its batch is walked.
        control = feeds.controls.get(queue)
        if not control.awaited or control.grouped:
            return None
        if any(task.queue != queue for task in tasks):
            return None
        _, room = buffer_room(feeds, sizes)
        if room < 1:  # the claimers' own rule: no claim past what the handlers want
            return None
        limit = claim_size(min(len(tasks), room), sizes.batch)
        lease_s = sizes.lease_s[queue]
        began = time.time_ns() if tracing.tracer is not None else 0
        sent = feeds.keeper.monotonic()  # the leases begin no earlier than this
        buckets = feeds.client.bucket_count
        # The turn kept from before a reshard may lie beyond a lowered count.
        bucket = self._next.get(queue, random.randrange(buckets)) % buckets
        self._next[queue] = (bucket + 1) % buckets
        handed = feeds.client.perform(handover.ack_and_claim(
            feeds.client.statements, tasks, kept, queue, bucket, control=control,
            limit=limit, lease_s=lease_s, worker_id=feeds.worker_id))
        claimed = handed.turn.tasks
        observe_waits(feeds.metrics, queue, claimed)
        deliver(feeds, queue, claimed, limit, lease_s, sent, began)
        if handed.lost:
            raise LeaseLost(handed.lost)
        return len(claimed)
