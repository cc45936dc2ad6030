"""Claimers: threads that visit (queue, bucket) pairs round-robin and fill the prefetch buffer.

Each claimer starts at its own offset so that claimers spread over the buckets, and
*owns* the slice of targets from its offset up to the next claimer's.  A claim that
filled its limit makes its target due again at once: more may be waiting.  A plain
claim that found fewer drained its range, since every row it passed over (SKIP LOCKED)
was taken by a concurrent claim, which comes back itself if it was full.  With
notifications heard, such a target cools down as an empty one does (new work there is
announced); without them it is due again at once, as nothing would say so.  At a
moderate rate this halves the claims: each task used to cost the claim that took it
and an empty one after it.  (A turn of a flow-controlled queue reads one group's
range, so a short one says nothing of the bucket: it is due again at once.)  An empty
target cools down for a while, at most ``poll_max_s`` for an owned target
and ``poll_max_s`` times the number of claimers for the others, so that every target
is still looked at about once per ``poll_max_s`` by the worker as a whole while idle
polling costs one claim per target, not one per claimer.

How long the cool-down is depends on whether the worker hears enqueue notifications.
When it does, new work is announced (a hint sends one claimer to its bucket), so an
empty target cools down for the whole cap at once: polling is only the safety net for
missed notes and for scheduled tasks coming due.  When it does not, the cool-down
starts short and doubles on each empty visit.  When every target is cooling down the
claimer sleeps until the first is due again, or until it is woken.

Notifications are coalesced.  A claimer given a hint within a few ``coalesce_s`` of
the one before (notes that follow one another) waits ``coalesce_s`` from the first for
more (the worker hands further notes to the claimer gathering them), then
claims every hinted bucket of that queue in one statement (``claim_buckets``): at a
moderate rate tasks arrive in ones, each in a bucket of its own, and a claim per task
was most of a worker's and the server's work.  The wait is added to the pickup of the
first task of a burst only.  Polls are gathered the same way: a poll takes with it
the queue's other buckets whose poll is nearly due, so an idle worker's polls come to
about one statement per claimer and ``poll_max_s``, not one per bucket.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol
from uuid import UUID

from shardq.client import Client
from shardq.core import tracing
from shardq.core.loop import Loop
from shardq.core.task import Task
from shardq.handler import Context
from shardq.ops.flow import Control
from shardq.worker.buffer import Buffer
from shardq.worker.controls import Controls
from shardq.worker.leases import LeaseKeeper
from shardq.worker.metrics import Metrics

log = logging.getLogger("shardq.worker")

FIRST_COOLDOWN_S = 0.01
QUIET_HINTS = 5
"""A hint that comes more than this many ``coalesce_s`` after the one before is claimed
at once, not gathered with those that may follow."""
FULL_BUFFER_WAIT_S = 0.05


def claim_size(room: int, batch: int) -> int:
    """The claim LIMIT for ``room`` free places (at least 1): ``batch`` when it fits, else
    the largest power of two that does.  A worker's claims then use at most
    log2(batch) + 2 distinct statement texts, each prepared once per connection."""
    if room >= batch:
        return batch
    return 1 << (max(1, room).bit_length() - 1)


class Schedule:
    """Round-robin order over (queue, bucket) targets with per-target cool-downs.

    ``share`` is how many claimers split the targets; this schedule owns the first
    ``ceil(len(targets) / share)`` of them after rotating by ``offset``.  ``listening``
    says whether new work is announced (see the module's docstring).
    """

    def __init__(self, targets: list[tuple[str, int]], offset: int, poll_max_s: float, *,
                 share: int = 1, listening: bool = False, coalesce_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        n = len(targets)
        self.targets = targets[offset % n:] + targets[:offset % n]
        self.poll_max_s, self.listening, self.clock = poll_max_s, listening, clock
        self.coalesce_s = coalesce_s
        owned = -(-n // max(1, share))
        self._cap = [poll_max_s if i < owned else poll_max_s * share for i in range(n)]
        self._next = 0
        self._cool_until = [0.0] * n
        self._cooldown = [0.0] * n
        self._hints: list[int] = []
        self._hinted_at = 0.0  # when the first of the pending hints came
        self._last_hint_at = float("-inf")  # when the latest hint came
        self._index = {target: i for i, target in enumerate(self.targets)}

    def pick(self) -> tuple[int, float]:
        """The index of the next target to claim from, or (-1, seconds until one is due).
        Hinted targets come first, once the first hint is ``coalesce_s`` old."""
        now = self.clock()
        if self._hints:
            gathered = now - self._hinted_at
            if gathered < self.coalesce_s:
                return -1, self.coalesce_s - gathered
            return self._hints.pop(0), 0.0
        n = len(self.targets)
        for step in range(n):
            i = (self._next + step) % n
            if self._cool_until[i] <= now:
                self._next = (i + 1) % n
                return i, 0.0
        return -1, max(0.0, min(self._cool_until) - now)

    def record(self, index: int, claimed: int, wait_s: float | None = None, *,
               drained: bool = False) -> None:
        """Note that a claim on target ``index`` took ``claimed`` tasks; ``wait_s``: a
        rate gave none and gives again in that long (the target cools down as long);
        ``drained``: the claim took all its range held (a plain claim short of its
        limit), which cools the target down like an empty visit when listening."""
        if claimed and not (drained and self.listening):
            self._due(index)
            return
        if wait_s is not None:
            self._cooldown[index] = wait_s
            self._cool_until[index] = self.clock() + wait_s
            return
        cap = self._cap[index]
        doubled = min(cap, max(FIRST_COOLDOWN_S, self._cooldown[index] * 2))
        cooldown = cap if self.listening else doubled
        self._cooldown[index] = cooldown
        self._cool_until[index] = self.clock() + cooldown

    def record_listed(self, indices: list[int], claimed: list[int], *, drained: bool) -> None:
        """Note a claim of several targets (``claim_buckets``) that took ``claimed[k]``
        tasks from ``indices[k]``.  Short of its limit (``drained``) it read every range
        to its end: each is recorded as a claim of its own would be.  At its limit,
        those it reached may hold more and the rest were not read: all are due again."""
        for index, count in zip(indices, claimed, strict=True):
            if drained:
                self.record(index, count, drained=True)
            else:
                self._due(index)

    def _due(self, index: int) -> None:
        self._cooldown[index] = 0.0
        self._cool_until[index] = 0.0

    def reset(self, queue: str | None = None) -> None:
        """Make every target (of ``queue``) due now: there is new work in many buckets."""
        for i, (q, _) in enumerate(self.targets):
            if queue is None or q == queue:
                self._cool_until[i] = 0.0
                self._cooldown[i] = 0.0

    @property
    def hinted(self) -> bool:
        """Whether a hinted target waits to be picked."""
        return bool(self._hints)

    @property
    def hinted_targets(self) -> list[tuple[str, int]]:
        """The hinted targets waiting to be picked, in the order they will be (a copy)."""
        return [self.targets[i] for i in self._hints]

    def index_of(self, queue: str, bucket: int) -> int:
        """The index of target (``queue``, ``bucket``) in :attr:`targets`."""
        return self._index[(queue, bucket)]

    def cooldown_s(self, index: int) -> float:
        """How long target ``index`` cools down after its last empty visit (0 once a
        claim there found work, or after a reset)."""
        return self._cooldown[index]

    def hint(self, queue: str, bucket: int, *, at_once: bool = False) -> None:
        """New work in one bucket: claim from (``queue``, ``bucket``) next; ``at_once``
        without waiting ``coalesce_s`` for more (with the hints already gathered)."""
        index = self._index.get((queue, bucket))
        now = self.clock()
        # A note after a quiet spell is claimed at once: gathering pays only when notes
        # follow one another (an idle queue's task would wait coalesce_s for nothing).
        alone = now - self._last_hint_at > QUIET_HINTS * self.coalesce_s
        self._last_hint_at = now
        if index is not None and index not in self._hints:
            if not self._hints:
                self._hinted_at = float("-inf") if alone else now
            self._hints.append(index)
        if at_once:
            self._hinted_at = float("-inf")

    def take_with(self, index: int) -> list[int]:
        """The targets to claim together with target ``index``, just picked: the hinted
        ones of its queue (taken out of the hints), and, when ``index`` was picked as a
        poll (it had cooled down), the others of its queue whose poll falls due within
        half that cool-down.  Idle polls so come to one statement for many buckets, not
        one each."""
        queue = self.targets[index][0]
        taken = [i for i in self._hints if self.targets[i][0] == queue]
        if taken:
            self._hints = [i for i in self._hints if self.targets[i][0] != queue]
        cooldown = self._cooldown[index]
        if cooldown > 0:
            horizon = self.clock() + cooldown / 2
            taken += [i for i, (q, _) in enumerate(self.targets)
                      if q == queue and i != index and i not in taken
                      and self._cooldown[i] > 0 and self._cool_until[i] <= horizon]
        return taken


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
    the targets of its ``schedule``."""

    def __init__(self, name: str, feeds: Feeds, schedule: Schedule, sizes: ClaimSizes) -> None:
        super().__init__(name, schedule.poll_max_s)
        self.feeds, self.schedule, self.sizes = feeds, schedule, sizes
        self.client, self.buffer, self.keeper = feeds.client, feeds.buffer, feeds.keeper
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
        # The buffer itself is unbounded so a put never blocks; claimers keep it near the
        # demand, at most ``capacity`` (concurrent claimers may overshoot by a batch each),
        # less the completer's lag (see Completer.lag).
        target = min(sizes.capacity, self.feeds.demand())
        room = target - self.buffer.qsize() - self.feeds.lag()
        # Wait for room for a whole batch (or half the target) while the buffer still
        # feeds the handlers: claiming whatever room a single finished task made would
        # mean one tiny claim per task.
        low_water = min(sizes.batch, max(1, target // 2))
        if room <= 0 or (room < low_water and not self.buffer.empty()):
            self._wait_s, self._starved = FULL_BUFFER_WAIT_S, True
            self.resume_below = max(0, self.buffer.qsize() + room - low_water)
            return Claimed(starved=True)
        self._starved = False
        with self._reset_lock:
            index, wait_s = self.schedule.pick()
        if index < 0:
            self._wait_s = wait_s
            return Claimed()
        queue, bucket = self.schedule.targets[index]
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
        finally:
            self._claiming = False
        deliver(self.feeds, queue, tasks, limit, lease_s, sent, began)
        self._wait_s = 0.0
        return Claimed(len(tasks))

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
