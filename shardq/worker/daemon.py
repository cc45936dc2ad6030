"""The worker: claimers, handler slots, lease keeper, completer, janitors and listener, wired.

Shutdown (:meth:`Worker.stop`) stops claiming, gives back (without penalty) the
tasks still waiting in the prefetch buffer, lets running handlers finish within
the grace period, writes every outcome, and gives back what is still running.
"""

from __future__ import annotations

import logging
import queue as queue_module
import random
import threading
from typing import Any

from shardq.app import App
from shardq.client import Client
from shardq.clock import Clock
from shardq.config import ClientConfig
from shardq.errors import ConfigError, LeaseLost
from shardq.handler import Context
from shardq.janitor import Janitor
from shardq.loop import Loop
from shardq.validate import queue_name
from shardq.worker.claimer import Claimer, Schedule
from shardq.worker.completer import Completer, Outcome
from shardq.worker.config import WorkerConfig
from shardq.worker.leases import LeaseKeeper
from shardq.worker.metrics import Metrics
from shardq.worker.notifier import Listener
from shardq.worker.slots import Slots

log = logging.getLogger("shardq.worker")

STATS_INTERVAL_S = 10.0


class StatsSampler(Loop[int]):
    """Samples each queue's depth and oldest eligible age into the metrics."""

    def __init__(self, client: Client, queues: list[str], metrics: Metrics) -> None:
        super().__init__("shardq-stats", STATS_INTERVAL_S)
        self.client, self.queues, self.metrics = client, queues, metrics

    def run_once(self) -> int:
        """One sample of every queue; returns how many were sampled."""
        for queue in self.queues:
            stats = self.client.stats(queue)
            self.metrics.depth.labels(queue).set(stats["available"])
            self.metrics.oldest.labels(queue).set(stats["oldest_eligible_age_s"] or 0)
        return len(self.queues)


class Worker:
    """Consumes ``app``'s queues until :meth:`stop`."""

    def __init__(self, app: App, client_config: ClientConfig, config: WorkerConfig, *,
                 clock: Clock | None = None) -> None:
        self.app, self.config = app, config
        queues = [queue_name(q) for q in (config.queue or app.queues)]
        if not queues:
            raise ConfigError("nothing to consume: the app has no tasks and no --queue was given")
        self.client = Client(config=client_config, clock=clock)
        app.use_client(self.client)
        # One connection per claimer and janitor, plus the lease keeper, the completer,
        # the stats sampler and handlers that enqueue.
        needed = config.claimers + config.janitors + 5
        if client_config.pool_max_size < needed:
            self.client.db.pool.resize(min_size=1, max_size=needed)
        self.queues = queues
        self.metrics = Metrics()
        self.buffer: queue_module.SimpleQueue[Context] = queue_module.SimpleQueue()
        leases = {q: app.lease_s(q, client_config.lease_s) for q in queues}
        self.keeper = LeaseKeeper(self.client, max(leases.values()), self.metrics)
        self.completer = Completer(self.client, self.metrics, batch=config.ack_batch,
                                   flush_ms=config.ack_flush_ms, written=self._made_room)
        self.slots = Slots(app, self.buffer, concurrency=config.concurrency, report=self._report,
                           taken=self._made_room, metrics=self.metrics)
        self.listener = (Listener(self.client.db.dsn, set(queues), self._heard)
                         if config.listen and self.client.dialect == "postgresql" else None)
        self.claimers = self._claimers(queues, leases)
        self.janitors = [Janitor(self.client, config.janitor_interval_s)
                         for _ in range(config.janitors)]
        self.sampler = (StatsSampler(self.client, queues, self.metrics)
                        if config.metrics_port else None)
        self._turn = 0
        self._state_lock = threading.Lock()
        self._started = self._stopped = False

    def _claimers(self, queues: list[str], leases: dict[str, float]) -> list[Claimer]:
        count = self.config.claimers
        targets = [(q, b) for b in range(self.client.bucket_count) for q in queues]
        base = random.randrange(len(targets))
        # Two batches: one claim can be in flight while a batch still feeds the handlers.
        capacity = max(2 * self.config.batch, self.config.concurrency)
        return [Claimer(f"shardq-claimer-{i}", self.client,
                        Schedule(targets, base + i * len(targets) // count,
                                 self.config.poll_max_ms / 1000, share=count,
                                 listening=self.listener is not None),
                        buffer=self.buffer, capacity=capacity, keeper=self.keeper,
                        batch=self.config.batch, lease_s=leases.__getitem__,
                        metrics=self.metrics, lag=self.completer.lag)
                for i in range(count)]

    def _report(self, context: Context, outcome: Outcome) -> None:
        if self.keeper.let_go(context):
            self.completer.add(outcome)
        # else: the lease was lost; another worker may hold the task, so the result is dropped.

    def _made_room(self) -> None:
        # One waiting claimer is enough: it claims a batch, and waking them all would
        # only have them race for the same room.
        for claimer in self.claimers:
            if claimer.starved:
                claimer.wake()
                return

    def _heard(self, queue: str | None, bucket: int | None) -> None:
        if queue is None or bucket is None:  # work in many buckets, or notes were missed
            for claimer in self.claimers:
                claimer.notify(queue, bucket)
            return
        # One task in one bucket: one claimer is enough.  Waking them all would make
        # every claimer claim, mostly in vain, for every enqueued task.  Turns rotate
        # so that hints spread; an idle claimer is preferred so the hint is acted on now.
        n = len(self.claimers)
        self._turn = (self._turn + 1) % n
        order = [self.claimers[(self._turn + k) % n] for k in range(n)]
        chosen = next((c for c in order if c.idle), order[0])
        chosen.notify(queue, bucket)

    def _loops(self) -> list[Loop[Any]]:
        loops: list[Loop[Any]] = [self.completer, self.keeper, *self.janitors]
        return [*loops, self.sampler] if self.sampler else loops

    def start(self) -> None:
        """Start every part (no-op when started)."""
        with self._state_lock:
            if self._started:
                return
            self._started = True
        if self.config.metrics_port:
            self.metrics.serve(self.config.metrics_port, self.config.metrics_host)
        for loop in self._loops():
            loop.start()
        self.slots.start()
        for claimer in self.claimers:
            claimer.start()
        if self.listener:
            self.listener.start()
        log.info("consuming %s with %d claimers and %d handler slots on %d buckets",
                 ", ".join(self.queues), len(self.claimers), self.config.concurrency,
                 self.client.bucket_count)

    def stop(self, grace_s: float | None = None) -> None:
        """Shut down gracefully (no-op when stopped); see the module's docstring."""
        with self._state_lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
        grace = self.config.shutdown_grace_s if grace_s is None else grace_s
        if self.listener:
            self.listener.stop()
        for claimer in self.claimers:
            claimer.stop()
        self.slots.close()
        self._give_back(self._drain_buffer(), "prefetched")
        self._give_back(self.slots.join(grace), "still running after the grace period")
        for loop in self._loops():
            loop.stop()
        self.completer.run_once()
        self.client.close()
        log.info("stopped")

    def _drain_buffer(self) -> list[Context]:
        drained = []
        while True:
            try:
                drained.append(self.buffer.get_nowait())
            except queue_module.Empty:
                return drained

    def _give_back(self, contexts: list[Context], why: str) -> None:
        tasks = [c.task for c in contexts if self.keeper.let_go(c)]
        for context in contexts:  # a handler still running learns its result is not wanted
            context.lose()
        if not tasks:
            return
        try:
            self.client.release_many(tasks)
        except LeaseLost as lost:
            log.warning("%d task(s) %s had already lost their lease", len(lost.task_ids), why)
        log.info("gave back %d task(s) %s", len(tasks), why)
