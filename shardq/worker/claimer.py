"""Claimers: threads that visit (queue, bucket) pairs round-robin and fill the prefetch buffer.

Which target a claimer visits next, and when, is its
:class:`~shardq.worker.schedule.Schedule`'s (round-robin over the targets it owns, cool-downs,
notifications gathered into one claim).

How many tasks a claim takes is bounded twice.  By the handlers: the buffer holds
about as many tasks as there are free slots, plus what the slots will get through in a
short time at the recent handler durations (the worker's ``demand``), so a worker of
slow handlers does not hoard tasks that another worker's idle slots could run.  And by
the prepared statements: the batch LIMIT is a literal of the claim's text, so each
distinct size would be a statement of its own; sizes are rounded down to a power of
two or the batch itself (:func:`claim_size`), a handful of statements per worker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol
from uuid import UUID

from shardq.client import Client
from shardq.core import tracing
from shardq.core.errors import InvalidTask
from shardq.core.loop import Loop
from shardq.core.task import Task
from shardq.handler import Context
from shardq.ops.flow import Control
from shardq.worker.buffer import Buffer
from shardq.worker.controls import Controls
from shardq.worker.leases import LeaseKeeper
from shardq.worker.metrics import Metrics
from shardq.worker.schedule import Schedule

log = logging.getLogger("shardq.worker")

FULL_BUFFER_WAIT_S = 0.05


def claim_size(room: int, batch: int) -> int:
    """The claim LIMIT for ``room`` free places (at least 1): ``batch`` when it fits, else
    the largest power of two that does.  A worker's claims then use at most
    log2(batch) + 2 distinct statement texts, each prepared once per connection."""
    if room >= batch:
        return batch
    return 1 << (max(1, room).bit_length() - 1)


@dataclass(frozen=True)
class Claimed:
    """What one step of a claimer did: ``tasks`` claimed (0 for an empty claim or none
    due), or nothing because the buffer had no room (``starved``)."""

    tasks: int = 0
    starved: bool = False


@dataclass(frozen=True)
class ClaimSizes:
    """How much a worker's claimers take: ``batch`` tasks a claim at most, ``capacity``
    in the buffer at most, each on its queue's lease (``lease_s``); a task waiting in the
    buffer over ``max_wait_s`` is given back."""

    batch: int
    capacity: int
    max_wait_s: float
    lease_s: Mapping[str, float]


class Feeds(Protocol):
    """The worker a claimer feeds: its parts, and what it says of its handlers now."""

    client: Client
    buffer: Buffer
    keeper: LeaseKeeper
    metrics: Metrics
    controls: Controls
    worker_id: UUID

    def demand(self) -> int:
        """How many tasks the buffer should hold now."""

    def lag(self) -> int:
        """Outcomes settled but not yet written (they still hold room)."""

    def give_back_waiting(self, contexts: list[Context]) -> None:
        """Give back tasks that waited in the buffer too long."""

    def schedule(self, index: int) -> Schedule:
        """The schedule of claimer ``index`` over the layout in use now."""


def buffer_room(feeds: Feeds, sizes: ClaimSizes) -> tuple[int, int]:
    """How many tasks ``feeds``' buffer should hold now, and the room left under that.
    The buffer itself is unbounded so a put never blocks; what claims it keeps near the
    handlers' demand, at most ``sizes.capacity``, less the tasks it holds and the
    outcomes the completer has yet to write (see Completer.lag)."""
    target = min(sizes.capacity, feeds.demand())
    return target, target - feeds.buffer.qsize() - feeds.lag()


def deliver(feeds: Feeds, queue: str, tasks: list[Task], limit: int, lease_s: float,
            sent: float, began: int) -> None:
    """Put ``tasks`` just claimed from ``queue`` (by a claim of at most ``limit``, sent
    at ``sent`` on the lease keeper's clock, ``began`` at that time in ns for a tracer)
    into ``feeds``' buffer under their leases of ``lease_s``, counted and traced."""
    if not tasks:  # an empty claim (a poll) is not counted and makes no span
        return
    feeds.metrics.claimed.labels(queue).inc(len(tasks))
    feeds.metrics.batch_fill.observe(len(tasks) / limit)
    feeds.buffer.put_many(feeds.keeper.hold(tasks, lease_s, sent))
    tracer = tracing.tracer
    if tracer is not None:
        tracer.received(queue, tasks, began)


def observe_waits(metrics: Metrics, queue: str, tasks: list[Task]) -> None:
    """Record how long each of ``tasks``, claimed under ``queue``'s limits, waited since
    it was enqueued."""
    if tasks:
        waited, histogram = datetime.now(UTC), metrics.limit_wait.labels(queue)
        for task in tasks:
            histogram.observe(max(0.0, (waited - task.enqueued_at).total_seconds()))


class Claimer(Loop[Claimed]):
    """Claims batches into the buffer of the worker it ``feeds``, sized by ``sizes``, on
    the targets of its schedule (the worker's for claimer ``index``)."""

    def __init__(self, name: str, feeds: Feeds, index: int, sizes: ClaimSizes) -> None:
        self.feeds, self.index, self.sizes = feeds, index, sizes
        self.client, self.buffer, self.keeper = feeds.client, feeds.buffer, feeds.keeper
        self.generation = self.client.statements.layout.generation
        self.schedule = feeds.schedule(index)
        super().__init__(name, self.schedule.poll_max_s)
        self.metrics, self.controls = feeds.metrics, feeds.controls
        self._reset_lock = threading.Lock()
        self._wait_s = 0.0
        self._claiming = False
        self._starved = False
        self.resume_below = 0  # while starved: the buffer size that leaves room for a claim
        # Per flow-controlled queue: the last group this claimer served (None: the
        # ungrouped tasks' turn is next), so that its turns go round the groups.
        self._after: dict[str, str | None] = {}

    def notify(self, queue: str | None, bucket: int | None = None, *,
               at_once: bool = False) -> None:
        """New work: in ``bucket`` of ``queue`` (look there next: ``at_once``, or after
        gathering notes for ``coalesce_s``), or anywhere in ``queue`` when the bucket is
        unknown, or in any queue when ``queue`` is None (forget the cool-downs).  Wakes
        the claimer."""
        with self._reset_lock:
            if queue is not None and bucket is not None:
                self.schedule.hint(queue, bucket, at_once=at_once)
            else:
                self.schedule.reset(queue)
        self.wake()

    def run_once(self) -> Claimed:
        """One claim on the next due target, sized to the room left in the buffer."""
        sizes = self.sizes
        # Slots counted on to take what waits may be held up (a handler far longer than
        # the recent ones): at each step, wake those the waiting tasks still need.
        self.buffer.wake()
        stale = self.buffer.take_older_than(sizes.max_wait_s)
        if stale:  # the handlers are slower than the demand assumed: let others run these
            self.feeds.give_back_waiting(stale)
        # Concurrent claimers may overshoot the target by a batch each.
        target, room = buffer_room(self.feeds, sizes)
        # Wait for room for a whole batch (or half the target) while the buffer still
        # feeds the handlers: claiming whatever room a single finished task made would
        # mean one tiny claim per task.
        low_water = min(sizes.batch, max(1, target // 2))
        if room <= 0 or (room < low_water and not self.buffer.empty()):
            self._wait_s, self._starved = FULL_BUFFER_WAIT_S, True
            self.resume_below = max(0, self.buffer.qsize() + room - low_water)
            return Claimed(starved=True)
        self._starved = False
        self._follow_layout()
        with self._reset_lock:
            index, wait_s = self.schedule.pick()
        if index < 0:
            self._wait_s = wait_s
            return Claimed()
        queue, bucket = self.schedule.targets[index]
        generation = self.generation
        limit = claim_size(room, sizes.batch)
        lease_s = sizes.lease_s[queue]
        self._claiming = True
        began = time.time_ns() if tracing.tracer is not None else 0
        sent = self.keeper.monotonic()  # the leases begin no earlier than this
        try:
            control = self.controls.get(queue)
            if control.controlled:
                tasks, rate_wait_s = self._claim_turn(queue, bucket, control, limit, lease_s)
                with self._reset_lock:
                    self.schedule.record(index, len(tasks), rate_wait_s)
            else:
                tasks = self._claim_plain(index, queue, limit, lease_s)
        except InvalidTask:
            # Another thread's call read a new layout between the pick and the claim,
            # which has fewer buckets than this one: the next step picks from a new
            # schedule.
            if self.client.statements.layout.generation == generation:
                raise
            tasks = []
        finally:
            self._claiming = False
        deliver(self.feeds, queue, tasks, limit, lease_s, sent, began)
        self._wait_s = 0.0
        return Claimed(len(tasks))

    def _follow_layout(self) -> None:
        """After a reshard's switch (the client's layout, read again when due, has a new
        generation): a schedule over the new buckets, and the worker's row told at once
        (the heartbeat writes the generation it claims with; the reshard waits for it)."""
        self.client.follow_layout()
        generation = self.client.statements.layout.generation
        if generation == self.generation:
            return
        with self._reset_lock:
            self.generation, self.schedule = generation, self.feeds.schedule(self.index)
        self.keeper.wake()

    def _claim_plain(self, index: int, queue: str, limit: int, lease_s: float) -> list[Task]:
        """A claim of target ``index``, with the other buckets of its queue that are
        hinted or due for a poll in the same statement (see the module's docstring);
        recorded in the schedule."""
        with self._reset_lock:
            listed = [index, *self.schedule.take_with(index)]
        buckets = [self.schedule.targets[i][1] for i in listed]
        worker_id = self.feeds.worker_id
        try:
            if len(listed) == 1:
                tasks = self.client.claim_bucket(queue, buckets[0], limit=limit,
                                                 lease_s=lease_s, worker_id=worker_id)
            else:
                tasks = self.client.claim_buckets(queue, buckets, limit=limit,
                                                  lease_s=lease_s, worker_id=worker_id)
        except BaseException:
            with self._reset_lock:  # the statement failed: its buckets are still to visit
                self.schedule.record_listed(listed, [0] * len(listed), drained=False)
            raise
        taken = Counter(task.bucket for task in tasks)
        with self._reset_lock:
            self.schedule.record_listed(listed, [taken[b] for b in buckets],
                                        drained=len(tasks) < limit)
        return tasks

    def _claim_turn(self, queue: str, bucket: int, control: Control, limit: int,
                    lease_s: float) -> tuple[list[Task], float | None]:
        """One turn of flow-controlled ``queue`` at ``bucket`` under its ``control``; with
        how long a rate asks to wait (None: no rate bound)."""
        turn = self.client.claim_turn(queue, bucket, after=self._after.get(queue),
                                      control=control, limit=limit, lease_s=lease_s,
                                      worker_id=self.feeds.worker_id)
        self._after[queue] = turn.after
        observe_waits(self.metrics, queue, turn.tasks)
        if turn.raced:  # another claim took the slot this one chose: others may be free
            return turn.tasks, 0.0
        return turn.tasks, turn.wait_s or None

    @property
    def claiming(self) -> bool:
        """Whether a claim statement of this claimer is in flight."""
        return self._claiming

    @property
    def starved(self) -> bool:
        """Whether the claimer is waiting for room in the buffer."""
        return self._starved

    @property
    def gathering(self) -> bool:
        """Whether the claimer holds hints it has yet to claim, and is not claiming: a
        notification given to it joins them in its next claim."""
        return self.schedule.hinted and not self._claiming

    @property
    def idle(self) -> bool:
        """Whether the claimer is between claims, with room in the buffer and no hint
        pending: a notification given to it is acted on at once."""
        return not (self._claiming or self.starved or self.schedule.hinted)

    def delay_after(self, result: Claimed) -> float:
        """No pause while claims find work; otherwise until a bucket is due or a wake-up."""
        return self._wait_s
