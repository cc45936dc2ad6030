"""Claimers: threads that visit (queue, bucket) pairs round-robin and fill the prefetch buffer.

Each claimer starts at its own offset so that claimers spread over the buckets, and
*owns* the slice of targets from its offset up to the next claimer's.  A claim that
found tasks makes its target due again at once: more may be waiting (a short claim
proves nothing, since SKIP LOCKED passes over the rows a concurrent claim holds).
An empty target cools down for a while, at most ``poll_max_s`` for an owned target
and ``poll_max_s`` times the number of claimers for the others, so that every target
is still looked at about once per ``poll_max_s`` by the worker as a whole while idle
polling costs one claim per target, not one per claimer.

How long the cool-down is depends on whether the worker hears enqueue notifications.
When it does, new work is announced (a hint sends one claimer to its bucket), so an
empty target cools down for the whole cap at once: polling is only the safety net for
missed notes and for scheduled tasks coming due.  When it does not, the cool-down
starts short and doubles on each empty visit.  When every target is cooling down the
claimer sleeps until the first is due again, or until it is woken.
"""

from __future__ import annotations

import queue as queue_module
import threading
import time
from collections.abc import Callable

from shardq.client import Client
from shardq.handler import Context
from shardq.loop import Loop
from shardq.worker.leases import LeaseKeeper
from shardq.worker.metrics import Metrics

FIRST_COOLDOWN_S = 0.01
FULL_BUFFER_WAIT_S = 0.05


class Schedule:
    """Round-robin order over (queue, bucket) targets with per-target cool-downs.

    ``share`` is how many claimers split the targets; this schedule owns the first
    ``ceil(len(targets) / share)`` of them after rotating by ``offset``.  ``listening``
    says whether new work is announced (see the module's docstring).
    """

    def __init__(self, targets: list[tuple[str, int]], offset: int, poll_max_s: float, *,
                 share: int = 1, listening: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        n = len(targets)
        self.targets = targets[offset % n:] + targets[:offset % n]
        self.poll_max_s, self.listening, self.clock = poll_max_s, listening, clock
        owned = -(-n // max(1, share))
        self._cap = [poll_max_s if i < owned else poll_max_s * share for i in range(n)]
        self._next = 0
        self._cool_until = [0.0] * n
        self._cooldown = [0.0] * n
        self._hints: list[int] = []
        self._index = {target: i for i, target in enumerate(self.targets)}

    def pick(self) -> tuple[int, float]:
        """The index of the next target to claim from, or (-1, seconds until one is due)."""
        if self._hints:
            return self._hints.pop(0), 0.0
        now = self.clock()
        n = len(self.targets)
        for step in range(n):
            i = (self._next + step) % n
            if self._cool_until[i] <= now:
                self._next = (i + 1) % n
                return i, 0.0
        return -1, max(0.0, min(self._cool_until) - now)

    def record(self, index: int, claimed: int) -> None:
        """Note that a claim on target ``index`` took ``claimed`` tasks."""
        if claimed:
            self._cooldown[index] = 0.0
            self._cool_until[index] = 0.0
            return
        cap = self._cap[index]
        doubled = min(cap, max(FIRST_COOLDOWN_S, self._cooldown[index] * 2))
        cooldown = cap if self.listening else doubled
        self._cooldown[index] = cooldown
        self._cool_until[index] = self.clock() + cooldown

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

    def hint(self, queue: str, bucket: int) -> None:
        """New work in one bucket: claim from (``queue``, ``bucket``) next."""
        index = self._index.get((queue, bucket))
        if index is not None and index not in self._hints:
            self._hints.append(index)


class Claimer(Loop[int]):
    """Claims batches into the buffer; ``run_once`` returns tasks claimed (-1: buffer full)."""

    def __init__(self, name: str, client: Client, schedule: Schedule, *,
                 buffer: queue_module.SimpleQueue[Context], capacity: int, keeper: LeaseKeeper,
                 batch: int, lease_s: Callable[[str], float], metrics: Metrics,
                 lag: Callable[[], int] = lambda: 0) -> None:
        super().__init__(name, schedule.poll_max_s)
        self.client, self.schedule, self.buffer, self.keeper = client, schedule, buffer, keeper
        self.capacity, self.lag = capacity, lag
        self.low_water = min(batch, capacity)
        self.batch, self.lease_s, self.metrics = batch, lease_s, metrics
        self._reset_lock = threading.Lock()
        self._wait_s = 0.0
        self._claiming = False

    def notify(self, queue: str | None, bucket: int | None = None) -> None:
        """New work: in ``bucket`` of ``queue`` (look there next), or anywhere in ``queue``
        when the bucket is unknown, or in any queue when ``queue`` is None (forget the
        cool-downs).  Wakes the claimer."""
        with self._reset_lock:
            if queue is not None and bucket is not None:
                self.schedule.hint(queue, bucket)
            else:
                self.schedule.reset(queue)
        self.wake()

    def run_once(self) -> int:
        """One claim on the next due target, sized to the room left in the buffer."""
        # The buffer itself is unbounded so a put never blocks; claimers keep it near
        # ``capacity`` (concurrent claimers may overshoot by a batch each), less the
        # completer's lag (see Completer.lag).
        room = self.capacity - self.buffer.qsize() - self.lag()
        # Wait for room for a whole batch while the buffer still feeds the handlers:
        # claiming whatever room a single finished task made would mean one tiny claim
        # per task.
        if room <= 0 or (room < self.low_water and not self.buffer.empty()):
            self._wait_s = FULL_BUFFER_WAIT_S
            return -1
        with self._reset_lock:
            index, wait_s = self.schedule.pick()
        if index < 0:
            self._wait_s = wait_s
            return 0
        queue, bucket = self.schedule.targets[index]
        limit = min(self.batch, room)
        self._claiming = True
        try:
            tasks = self.client.claim_bucket(queue, bucket, limit=limit,
                                             lease_s=self.lease_s(queue))
        finally:
            self._claiming = False
        with self._reset_lock:
            self.schedule.record(index, len(tasks))
        if tasks:
            self.metrics.claimed.labels(queue).inc(len(tasks))
            self.metrics.batch_fill.observe(len(tasks) / limit)
            for context in self.keeper.hold(tasks):
                self.buffer.put(context)
        self._wait_s = 0.0
        return len(tasks)

    @property
    def starved(self) -> bool:
        """Whether the claimer is waiting for room in the buffer."""
        return self._wait_s == FULL_BUFFER_WAIT_S

    @property
    def idle(self) -> bool:
        """Whether the claimer is between claims, with room in the buffer and no hint
        pending: a notification given to it is acted on at once."""
        return not (self._claiming or self.starved or self.schedule.hinted)

    def delay_after(self, result: int) -> float:
        """No pause while claims find work; otherwise until a bucket is due or a wake-up."""
        return self._wait_s
