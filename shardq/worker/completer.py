"""Batched acks and nacks: outcomes wait a few milliseconds and are written together.

Writing many outcomes per statement is the largest throughput lever of a SQL
queue.  While an outcome waits, the lease keeper still extends its task's lease.
A crash before a flush loses nothing: those tasks' leases expire and they run again
(at-least-once).
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from shardq.client import Client
from shardq.core import tracing
from shardq.core.errors import ConnectionLost, DiskFull, LeaseLost, ShardqError, Unavailable
from shardq.core.loop import Loop
from shardq.core.task import Task
from shardq.ops import durable, settle
from shardq.ops.durable import Parking
from shardq.ops.results import Kept
from shardq.worker.metrics import Metrics

log = logging.getLogger("shardq.worker")

IDLE_S = 1.0
"""Longest the flusher sleeps with nothing pending (an outcome wakes it sooner)."""


@dataclass(slots=True)  # one per task: a frozen dataclass took four times as long to make
class Outcome:
    """What became of one run: ``ack`` (with the result to keep, if its handler keeps
    results), a park (a durable call waits), or a failure with its error and retry
    wishes."""

    task: Task
    ok: bool
    error: str | None = None
    retry_in_s: float | None = None
    dead: bool = False
    kept: Kept | None = None
    park: Parking | None = None


def _due_at(park: Parking) -> float:
    """When a parked task comes due, as Unix time (a park without a deadline: never)."""
    return (park.until or durable.NEVER).timestamp()


class Completer(Loop[int]):
    """Buffers outcomes and writes them in batches; ``run_once`` flushes and returns the count."""

    def __init__(self, client: Client, metrics: Metrics, *, batch: int, flush_ms: int,
                 release: Callable[[list[Task]], list[Task]],
                 written: Callable[[list[Task]], None] = lambda tasks: None,
                 urgent: Callable[[Task], bool] = lambda task: False,
                 parked: Callable[[list[tuple[str, int, float | None]]], None] = (
                     lambda parks: None),
                 hand_on: Callable[[list[Task], list[Kept | None]], int | None] = (
                     lambda tasks, kept: None)) -> None:
        super().__init__("shardq-completer", flush_ms / 1000)
        self.client, self.metrics, self.batch, self.written = client, metrics, batch, written
        self.urgent, self.parked, self.hand_on = urgent, parked, hand_on
        self.release = release
        # The acks of the chunk being written whose slots their successors took
        # (hand_on): nobody needs telling that those slots are free.
        self._refilled: set[int] = set()
        # Handler threads add, the flusher takes: a deque's append, popleft and len are
        # each atomic, so no lock is taken for every task (four handler threads on two
        # cores made one contended, and every contended acquire sleeps in the kernel).
        self._pending: deque[Outcome] = deque()
        self._writing = 0  # outcomes taken by run_once and not yet written
        # Idle (nothing pending) the flusher sleeps until an outcome comes, rather than
        # waking every flush interval to find nothing: 200 wake-ups a second were most
        # of an idle worker's CPU.  The first outcome wakes it, and it then gathers for
        # a flush interval before it writes.
        self._idle = False
        self._gather = False

    def add(self, outcome: Outcome) -> None:
        """Queue an outcome; the one that fills a batch, or an ``urgent`` one, wakes the
        flusher."""
        self._pending.append(outcome)
        # Once per batch: while a write takes long, outcomes pile up past a batch, and
        # waking the flusher for each would cost more than the add.  Two adds at once may
        # both see past the batch and neither wake it: it then flushes on its interval.
        # An urgent outcome (its task holds a slot of a running limit that claims wait
        # for) is written now: under a binding limit, the flush interval would be added
        # to every task's hold on its slot.
        if len(self._pending) == self.batch or self.urgent(outcome.task):
            self.wake()
        elif self._idle:  # the first after a quiet spell: the flusher sleeps till told
            self._idle = False
            self._gather = True
            self.wake()

    def lag(self) -> int:
        """Outcomes waiting beyond one statement's batch.  Their tasks stay locked and
        unextended, so claimers hold back by this many: claiming past a completer that
        cannot keep up would let those leases expire and the work run twice."""
        return max(0, len(self._pending) + self._writing - self.batch)

    def run_once(self) -> int:
        """Write every queued outcome (acks with one statement, failures with another)."""
        if self._gather:  # woken by the first outcome after a quiet spell: let more come
            self._gather = False  # (a full batch or an urgent outcome ends the wait)
            self._wake.wait(self.interval_s)
        pending, outcomes = self._pending, []
        try:
            for _ in range(len(pending)):  # what is there now; later ones wait for the next step
                outcomes.append(pending.popleft())
        except IndexError:  # a shutdown's last flush ran beside a step that had not ended
            pass
        self._writing += len(outcomes)
        for start in range(0, len(outcomes), self.batch):
            chunk = outcomes[start:start + self.batch]
            try:
                # Heartbeats keep these tasks' leases until here; a task whose lease
                # was lost meanwhile may run elsewhere, so its outcome is dropped.
                kept = self.release([o.task for o in chunk])
                chunk_kept = chunk
                if len(kept) < len(chunk):  # rare: compare only then (the same objects)
                    held = {id(t) for t in kept}
                    chunk_kept = [o for o in chunk if id(o.task) in held]
                acks: list[Outcome] = []
                fails: list[Outcome] = []
                parks: list[Outcome] = []
                for o in chunk_kept:  # one pass: this runs for every task
                    (acks if o.ok else fails if o.park is None else parks).append(o)
                self._write(acks, fails, parks)
            finally:
                self._writing -= len(chunk)
                # Claimers held back by the lag may go on; these tasks' capacity slots,
                # if they held any and no successor took them, are free.
                refilled, self._refilled = self._refilled, set()
                self.written([o.task for o in chunk if id(o.task) not in refilled])
        return len(outcomes)

    def delay_after(self, result: int) -> float:
        """Flush again at once while outcomes keep arriving in full batches, after the
        flush interval while some wait, and not before the next outcome when none does
        (:data:`IDLE_S` at most)."""
        if len(self._pending) >= self.batch:
            return 0
        if self._pending:
            return self.interval_s
        self._idle = True
        if self._pending:  # one came as the flag was set, and saw it unset: no sleep
            self._idle = False
            return self.interval_s
        return IDLE_S

    def _write(self, acks: list[Outcome], fails: list[Outcome], parks: list[Outcome]) -> None:
        if parks:
            self._settle(parks, self._park, "park")
            for o in parks:
                if o.park is not None:
                    self.metrics.parked.labels(o.task.queue, o.park.reason).inc()
        if acks:
            self._settle(acks, self._ack, "ack")
            queue = acks[0].task.queue
            if all(o.task.queue == queue for o in acks):  # the usual case: no Counter
                self.metrics.acked.labels(queue).inc(len(acks))
            else:
                for queue, n in Counter(o.task.queue for o in acks).items():
                    self.metrics.acked.labels(queue).inc(n)
        if fails:
            self._settle(fails, self._nack, "nack")
            for o in fails:
                dead = o.dead or o.task.is_last_attempt
                (self.metrics.dead if dead else self.metrics.failed).labels(o.task.queue).inc()

    def _ack(self, outcomes: list[Outcome]) -> None:
        # Results are written by the ack itself (a batch without any: the plain ack).
        tasks, kept = [o.task for o in outcomes], [o.kept for o in outcomes]
        claimed = self.hand_on(tasks, kept)  # with their successors' claim, if it applies
        if claimed is None:
            self.client.perform(settle.ack(self.client.statements, tasks, kept))
        elif claimed >= len(tasks):
            self._refilled.update(id(task) for task in tasks)

    def _park(self, outcomes: list[Outcome]) -> None:
        parkings = [o.park for o in outcomes if o.park is not None]
        rows = self.client.perform(durable.park(self.client.statements,
                                                [o.task for o in outcomes], parkings))
        parked = dict(rows)
        # When each comes due (now: what it waits for came meanwhile), for a wake-up call.
        self.parked([(o.task.queue, o.task.bucket,
                      None if parked[o.task.id] else _due_at(o.park))
                     for o in outcomes if o.task.id in parked and o.park is not None])
        if len(parked) < len(outcomes):
            raise LeaseLost([o.task.id for o in outcomes if o.task.id not in parked])

    def _nack(self, outcomes: list[Outcome]) -> None:
        self.client.nack_many([o.task for o in outcomes], [o.error for o in outcomes],
                              retry_in_s=[o.retry_in_s for o in outcomes],
                              dead=[o.dead for o in outcomes])

    def _settle(self, outcomes: list[Outcome], write: Callable[[list[Outcome]], None],
                operation: str) -> None:
        """Write outcomes with one statement (``operation``, for a tracer's span); if that
        fails for one bad outcome, write them one by one, so that only the bad one is
        lost."""
        try:
            tracer = tracing.tracer
            span = None if tracer is None else tracer.settle(operation,
                                                             [o.task for o in outcomes])
            if span is None:
                write(outcomes)
            else:
                with span:
                    write(outcomes)
        except LeaseLost as lost:
            for o in outcomes:
                if o.task.id in lost.task_ids:
                    self.metrics.lease_lost.labels(o.task.queue).inc()
            log.warning("%d outcome(s) discarded, their leases lost: the tasks were cancelled "
                        "or purged, or their leases expired and they run again (%s)",
                        len(lost.task_ids), ", ".join(str(i) for i in lost.task_ids[:5])
                        + (", ..." if len(lost.task_ids) > 5 else ""))
        except ShardqError as exc:
            # Without the database, or without room on its disk, writing them one by one
            # would fail the same way.
            if len(outcomes) > 1 and not isinstance(exc, Unavailable | ConnectionLost
                                                    | DiskFull):
                log.warning("writing %d outcome(s) failed (%s); writing them one by one",
                            len(outcomes), exc)
                for outcome in outcomes:
                    self._settle([outcome], write, operation)
                return
            # The leases will expire and the janitor will put the tasks back.
            log.error("writing %d outcome(s) failed (task %s, ...): %s; the tasks will run "
                      "again", len(outcomes), outcomes[0].task.id, exc)

