"""The worker: claimers, handler slots, lease keeper, completer, janitors and listener, wired.

Shutdown (:meth:`Worker.stop`) stops claiming, gives back (without penalty) the
tasks still waiting in the prefetch buffer, lets running handlers finish within
the grace period, writes every outcome, and gives back what is still running.
Running handlers get the whole grace whatever the database does; the shutdown's own
statements do not: each ends within ``connect_timeout_s``, and once one found the
database unreachable the rest are given up at once (one line counts the tasks left
locked: their leases expire and the janitor makes them eligible again).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import threading
import time
from typing import Any

from shardq.app import App
from shardq.client import Client
from shardq.core.clock import Clock
from shardq.core.config import ClientConfig
from shardq.core.errors import ConfigError, LeaseLost, ShardqError
from shardq.core.loop import Loop
from shardq.core.pooler import session_refusal
from shardq.core.task import Task
from shardq.core.validate import queue_name
from shardq.handler import Context
from shardq.loops.periodic import PeriodicLoop, register
from shardq.loops.vacuum import Vacuumer
from shardq.worker.alarms import Alarms
from shardq.worker.buffer import Buffer
from shardq.worker.claimer import Claimer, ClaimSizes
from shardq.worker.completer import Completer, Outcome
from shardq.worker.config import WorkerConfig
from shardq.worker.controls import Controls
from shardq.worker.coslots import LoopSlots
from shardq.worker.leases import HEARTBEAT_FRACTION, LeaseKeeper
from shardq.worker.metrics import Metrics
from shardq.worker.notifier import Listener
from shardq.worker.observe import MeteredJanitor, MeteredResolver, StatsSampler
from shardq.worker.presence import Presence
from shardq.worker.schedule import Schedule
from shardq.worker.slots import Slots, ThreadSlots
from shardq.worker.successors import Successors

log = logging.getLogger("shardq.worker")

FLUSH_RESERVE_S = 5.0  # of a shutdown's grace, kept for writing the last outcomes


class Worker:
    """Consumes ``app``'s queues until :meth:`stop`."""

    def __init__(self, app: App, client_config: ClientConfig, config: WorkerConfig, *,
                 clock: Clock | None = None) -> None:
        self.app, self.config = app, config
        queues = [queue_name(q) for q in (config.queue or app.queues)]
        if not queues:
            raise ConfigError("nothing to consume: the app has no tasks and no --queue was given")
        leases = {q: app.lease_s(q, client_config.lease_s) for q in queues}
        # Every statement must end well within a lease, or a stalled one outlives it:
        # a heartbeat that waited longer than lease_s / 3 would let leases lapse.
        deadline = min(client_config.statement_timeout_s,
                       min(leases.values()) / HEARTBEAT_FRACTION)
        self.client = Client(config=dataclasses.replace(
            client_config, pool_max_size=max(client_config.pool_max_size, config.connections),
            statement_timeout_s=deadline), clock=clock)
        refusal = self.client.db.transaction_pooled and session_refusal(
            config.listen and self.client.dialect.notify,
            bool(config.janitors) and Vacuumer(self.client).applies)
        if refusal:
            self.client.close()
            raise ConfigError(refusal)
        app.use_client(self.client)
        self.queues = queues
        self.metrics = Metrics()
        # Two batches: one claim can be in flight while a batch still feeds the handlers;
        # and with many slots, two rounds of them: hundreds of slots empty a buffer of one
        # round within milliseconds, less than a claim can take when they all want the GIL.
        self.capacity = max(2 * config.batch, 2 * config.concurrency)
        self.buffer = Buffer()
        # Wake-up calls for the tasks this worker parks, when each comes due.
        self.alarms = Alarms(self._due)
        # Who runs the tasks, in shardq.workers and in every attempt's record.
        self.presence = Presence(self.client, queues, config.worker_name)
        # Each task keeps its own lease; the heartbeat ticks for the shortest, and
        # refreshes the worker's row.
        self.keeper = LeaseKeeper(self.client, min(leases.values()), self.metrics,
                                  beat=self.presence.beat,
                                  beat_every_s=self.presence.every_s)
        self.sizes = ClaimSizes(batch=config.batch, capacity=self.capacity,
                                max_wait_s=config.prefetch_max_s, lease_s=leases)
        self.successors = Successors(self, self.sizes)
        self.completer = Completer(self.client, self.metrics, batch=config.ack_batch,
                                   flush_ms=config.ack_flush_ms, release=self.keeper.let_go,
                                   written=self._written, urgent=self._awaited,
                                   parked=self.alarms.parked,
                                   hand_on=self.successors)
        # Coroutine handlers run as coroutines on one event loop, with no thread per slot;
        # an app of plain functions only has no loop at all (see shardq.worker.slots).
        kind: type[Slots] = LoopSlots if any(h.is_async for h in app.handlers()) else ThreadSlots
        self.slots = kind(app, self.buffer, concurrency=config.concurrency, report=self._report,
                          taken=self._made_room, metrics=self.metrics)
        self.listener = (Listener(self.client.db.dsn, set(queues), self._heard,
                                  connect_timeout_s=client_config.connect_timeout_s)
                         if config.listen and self.client.dialect.notify else None)
        self.worker_id = self.presence.id
        self.controls = Controls(self.client, queues)
        self.claimers = self._claimers(queues)
        self.janitors = [MeteredJanitor(self.client, self.metrics)
                         for _ in range(config.janitors)]
        # One vacuum step per process that runs janitors: it works under a lock anyway.
        vacuumer = Vacuumer(self.client)
        self.vacuumers = [vacuumer] if config.janitors and vacuumer.applies else []
        # The flows' resolver beside the janitors: a task of a flow is released within
        # flow_interval_s of the last task it waited for ending.
        self.resolvers = [MeteredResolver(self.client, self.metrics)] if config.janitors else []
        self.sampler = (StatsSampler(self.client, queues, self.metrics, config.slo_s or None)
                        if config.metrics_port and config.sample_stats else None)
        self.periodic = (PeriodicLoop(self.client.statements, list(app.schedules.values()),
                                      queues, config.periodic_interval_s)
                         if app.schedules else None)
        # Each claimer and background loop takes a connection at its first step: open
        # them all now, in parallel, while the rest of the worker starts (grown on
        # demand, the pool opened them one after the other as the first claims waited).
        self.client.db.open_connections(len(self.claimers) + len(self._loops()))
        self._turn = 0
        self._state_lock = threading.Lock()
        self._started = self._stopped = False

    def _claimers(self, queues: list[str]) -> list[Claimer]:
        self._targets_base = random.random()
        return [Claimer(f"shardq-claimer-{i}", self, i, self.sizes)
                for i in range(self.config.claimers)]

    def schedule(self, index: int) -> Schedule:
        """The schedule of claimer ``index`` over every (queue, bucket) of the layout in
        use: made when the worker starts, and again when a reshard changes the bucket
        count (the claimer notices).  The claimers split the targets from one random
        offset, the same whatever the count."""
        count = self.config.claimers
        targets = [(q, b) for b in range(self.client.bucket_count) for q in self.queues]
        base = int(self._targets_base * len(targets))
        return Schedule(targets, base + index * len(targets) // count,
                        self.config.poll_max_ms / 1000, share=count,
                        listening=self.listener is not None,
                        coalesce_s=self.config.coalesce_ms / 1000)

    def demand(self) -> int:
        """How many tasks the prefetch buffer should hold: one per free slot, and what the
        slots get through in a quarter of ``prefetch_max_s`` at the recent handler
        durations (none before a handler finished: the first tasks could be slow ones).
        A task prefetched so then waits well within ``prefetch_max_s``; the claimers cap
        the buffer at ``capacity`` whatever the rate."""
        rate = self.slots.rate()
        ahead = 0 if rate is None else math.floor(rate * self.config.prefetch_max_s / 4)
        return self.slots.free + ahead

    def lag(self) -> int:
        """Outcomes the completer holds, not yet written (see Completer.lag)."""
        return self.completer.lag()

    def give_back_waiting(self, contexts: list[Context]) -> None:
        """Give back prefetched tasks that waited too long for a slot."""
        self._give_back(contexts, f"waiting over {self.config.prefetch_max_s:g}s for a slot")

    def _report(self, context: Context, outcome: Outcome) -> None:
        if not context.cancelled:
            self.completer.add(outcome)
        # else: the lease was lost; another worker may hold the task, so the result is dropped.
        self._made_room()  # a slot is free: the demand grew

    def _made_room(self) -> None:
        # One waiting claimer is enough: it claims a batch, and waking them all would
        # only have them race for the same room.  It is woken once the room suffices
        # for the claim it waits to make, not for every task a slot takes or finishes.
        # (If the demand grows instead, it looks again after FULL_BUFFER_WAIT_S.)
        for claimer in self.claimers:
            if claimer.starved:
                if self.buffer.qsize() <= claimer.resume_below:
                    claimer.wake()
                return

    def _written(self, tasks: list[Task]) -> None:
        """Outcomes were written: room for claims, and capacity back under a running limit.

        A task of a queue under ``max_running`` (or per group) gave its slot back as its
        outcome was written.  The claims that found no free slot meanwhile came back
        empty and cooled their buckets down as empty ones do (to ``poll_max_ms``), and
        no NOTIFY announces freed capacity: so one claimer is pointed at such a task's
        bucket, as an enqueue's NOTIFY would, and the slot is taken again at once.
        """
        self._made_room()
        hinted: set[str] = set()
        for task in tasks:
            if task.queue not in hinted:
                hinted.add(task.queue)
                if self._holds_capacity(task):
                    self._due(task.queue, task.bucket)

    def _holds_capacity(self, task: Task) -> bool:
        """Whether ``task``'s queue has a running limit (``max_running``, or per group),
        under which the task holds a slot until its outcome is written."""
        limits = self.controls.get(task.queue).limits
        return limits.max_running is not None or limits.max_running_per_group is not None

    def _awaited(self, task: Task) -> bool:
        """Whether claims may be waiting for the slot ``task`` holds (see
        :attr:`~shardq.ops.flow.Control.awaited`): its outcome is written at once
        rather than batched.  Under a limit that never binds, batching stays."""
        return self.controls.get(task.queue).awaited

    def _due(self, queue: str | None, bucket: int | None) -> None:
        """Work this worker knows of (a slot it freed, a task it parked coming due): a
        claimer goes to it at once, not after gathering notes."""
        self._heard(queue, bucket, at_once=True)

    def _heard(self, queue: str | None, bucket: int | None, *, at_once: bool = False) -> None:
        if queue is None or bucket is None:  # work in many buckets, or notes were missed
            for claimer in self.claimers:
                claimer.notify(queue, bucket)
            return
        # One task in one bucket: one claimer is enough.  Waking them all would make
        # every claimer claim, mostly in vain, for every enqueued task.  A claimer
        # gathering hints takes this one too (one claim for the burst); else turns
        # rotate so that hints spread, an idle claimer preferred so it is acted on now.
        n = len(self.claimers)
        self._turn = (self._turn + 1) % n
        order = [self.claimers[(self._turn + k) % n] for k in range(n)]
        chosen = (next((c for c in order if c.gathering), None)
                  or next((c for c in order if c.idle), order[0]))
        chosen.notify(queue, bucket, at_once=at_once)

    def _loops(self) -> list[Loop[Any]]:
        loops: list[Loop[Any]] = [self.completer, self.keeper, *self.janitors,
                                  *self.vacuumers, *self.resolvers]
        return loops + [loop for loop in (self.sampler, self.periodic) if loop is not None]

    def start(self) -> None:
        """Start every part (no-op when started)."""
        with self._state_lock:
            if self._started:
                return
            self._started = True
        # The app's schedules, as the code now defines them, before any slot is fired.
        register(self.client.statements, list(self.app.schedules.values()), self.queues)
        self.presence.register()
        if self.config.metrics_port:
            self.metrics.serve(self.config.metrics_port, self.config.metrics_host)
        for loop in self._loops():
            loop.start()
        self.slots.start()
        for claimer in self.claimers:
            claimer.start()
        self.alarms.start()
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
        # Before anything is given back: a successor claimed from here on would wait in a
        # buffer that is no longer emptied.
        self.successors.close()
        grace = self.config.shutdown_grace_s if grace_s is None else grace_s
        end = time.monotonic() + grace
        # Whatever the network does, no statement (nor retry) outlives the grace; the
        # last part of it is kept for writing the outcomes of handlers that finished.
        self.client.db.finish_within(grace)
        # A database that does not answer is given up on in a bounded time, so that the
        # worker exits once its handlers are done rather than at the end of the grace.
        self.client.db.fail_fast(self.client.config.connect_timeout_s)
        handlers_end = end - min(FLUSH_RESERVE_S, grace / 4)

        def left(until: float = end) -> float:
            return max(0.0, until - time.monotonic())

        if self.listener:
            self.listener.stop(0)  # it ends within a second; waited for last
        self.alarms.stop(0)
        for claimer in self.claimers:
            claimer.stop(left(handlers_end))
        self.slots.close()
        kept: list[Task] = []
        failure = self._give_back_at_stop(self.buffer.take_all(), "prefetched", kept)
        failure = self._give_back_at_stop(self.slots.join(left(handlers_end)),
                                          "still running after the grace period",
                                          kept) or failure
        for loop in self._loops():
            loop.stop(left())
        self.completer.run_once()
        if self.listener:
            self.listener.stop(left())
        self.presence.leave()
        self.client.close()
        if kept:
            log.warning("%d task(s) could not be given back (%s): they stay locked until "
                        "their leases expire, then the janitor makes them eligible again",
                        len(kept), failure)
        log.info("stopped")

    def _give_back_at_stop(self, contexts: list[Context], why: str,
                           kept: list[Task]) -> ShardqError | None:
        """:meth:`_give_back` that cannot fail the shutdown: the tasks it could not give
        back are added to ``kept``; returns why."""
        try:
            self._give_back(contexts, why)
        except ShardqError as exc:
            kept.extend(c.task for c in contexts)
            return exc
        return None

    def _give_back(self, contexts: list[Context], why: str) -> None:
        tasks = self.keeper.let_go([c.task for c in contexts])
        for context in contexts:  # a handler still running learns its result is not wanted
            context.lose()
        if not tasks:
            return
        try:
            self.client.release_many(tasks)
        except LeaseLost as lost:
            log.warning("%d task(s) %s had already lost their lease", len(lost.task_ids), why)
        log.info("gave back %d task(s) %s", len(tasks), why)
