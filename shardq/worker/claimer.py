"""Claimers: threads that visit (queue, bucket) pairs round-robin and fill the prefetch buffer.

Each claimer starts at its own offset so that claimers spread over the buckets.
A bucket found empty is skipped for a cool-down that doubles on each empty visit
(up to ``poll_max_ms``); a non-empty claim or an enqueue notification resets it.
When every bucket is cooling down the claimer sleeps until the first is due again,
or until it is woken.
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
    """Round-robin order over (queue, bucket) targets with per-target cool-downs."""

    def __init__(self, targets: list[tuple[str, int]], offset: int, poll_max_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.targets = targets[offset % len(targets):] + targets[:offset % len(targets)]
        self.poll_max_s, self.clock = poll_max_s, clock
        self._next = 0
        self._cool_until = [0.0] * len(self.targets)
        self._cooldown = [0.0] * len(self.targets)
        self._hint: int | None = None
        self._index = {target: i for i, target in enumerate(self.targets)}

    def pick(self) -> tuple[int, float]:
        """The index of the next target to claim from, or (-1, seconds until one is due)."""
        if self._hint is not None:
            hint, self._hint = self._hint, None
            return hint, 0.0
        now = self.clock()
        n = len(self.targets)
        for step in range(n):
            i = (self._next + step) % n
            if self._cool_until[i] <= now:
                self._next = (i + 1) % n
                return i, 0.0
        return -1, max(0.0, min(self._cool_until) - now)

    def record(self, index: int, claimed: int) -> None:
        """Note how a claim on target ``index`` went."""
        if claimed:
            self._cooldown[index] = 0.0
            self._cool_until[index] = 0.0
            return
        cooldown = min(self.poll_max_s, max(FIRST_COOLDOWN_S, self._cooldown[index] * 2))
        self._cooldown[index] = cooldown
        self._cool_until[index] = self.clock() + cooldown

    def reset(self, queue: str | None = None, bucket: int | None = None) -> None:
        """Make every target (of ``queue``) due now: there is new work; the next pick is
        (``queue``, ``bucket``) when both are given."""
        for i, (q, _) in enumerate(self.targets):
            if queue is None or q == queue:
                self._cool_until[i] = 0.0
                self._cooldown[i] = 0.0
        if queue is not None and bucket is not None:
            self._hint = self._index.get((queue, bucket))


class Claimer(Loop[int]):
    """Claims batches into the buffer; ``run_once`` returns tasks claimed (-1: buffer full)."""

    def __init__(self, name: str, client: Client, schedule: Schedule, *,
                 buffer: queue_module.Queue[Context], capacity: int, keeper: LeaseKeeper,
                 batch: int, lease_s: Callable[[str], float], metrics: Metrics,
                 unwritten: Callable[[], int] = lambda: 0) -> None:
        super().__init__(name, schedule.poll_max_s)
        self.client, self.schedule, self.buffer, self.keeper = client, schedule, buffer, keeper
        self.capacity, self.unwritten = capacity, unwritten
        self.batch, self.lease_s, self.metrics = batch, lease_s, metrics
        self._reset_lock = threading.Lock()
        self._wait_s = 0.0

    def notify(self, queue: str | None, bucket: int | None = None) -> None:
        """New work on ``queue`` (None: any), in ``bucket`` if known: wake up and look there
        first, and forget the queue's cool-downs."""
        with self._reset_lock:
            self.schedule.reset(queue, bucket)
        self.wake()

    def run_once(self) -> int:
        """One claim on the next due target, sized to the room left in the buffer."""
        # The buffer itself is unbounded so a put never blocks; claimers keep it near
        # ``capacity`` (concurrent claimers may overshoot by a batch each).  Outcomes not
        # yet written count too: their tasks stay locked without heartbeats, so claiming
        # past a slow completer would let their leases expire and the work run twice.
        room = self.capacity - self.buffer.qsize() - self.unwritten()
        if room <= 0:
            self._wait_s = FULL_BUFFER_WAIT_S
            return -1
        with self._reset_lock:
            index, wait_s = self.schedule.pick()
        if index < 0:
            self._wait_s = wait_s
            return 0
        queue, bucket = self.schedule.targets[index]
        limit = min(self.batch, room)
        tasks = self.client.claim_bucket(queue, bucket, limit=limit, lease_s=self.lease_s(queue))
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

    def delay_after(self, result: int) -> float:
        """No pause while claims find work; otherwise until a bucket is due or a wake-up."""
        return self._wait_s
