"""The janitor: rescues tasks whose lease expired, applies due priority head starts,
deletes dead tasks, kept results and attempts past their retention, forgets workers
not seen for ``worker_stale_s``, and clears the pauses of queues that ended.

It is separate from the claimers and safe to run in several processes at once:
every statement takes its rows with ``FOR UPDATE SKIP LOCKED`` and re-checks
their state, one bounded batch of one bucket at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import astuple, dataclass
from typing import Any, Protocol

from shardq.core import validate
from shardq.core.config import DAY_S
from shardq.core.errors import InvalidTask
from shardq.core.loop import Loop
from shardq.core.plan import Plan
from shardq.core.statements import Statements
from shardq.loops import resolver
from shardq.ops import attempts, audit, control, durable, history, sessions, workers


@dataclass(frozen=True)
class JanitorReport:
    """What one janitor pass did."""

    rescued: int = 0
    """Tasks whose lease expired, put back in line with backoff."""
    dead: int = 0
    """Tasks whose lease expired on their last attempt, now dead."""
    promoted: int = 0
    """Scheduled tasks that became due and got their priority head start."""
    purged: int = 0
    """Dead tasks deleted because they were older than the retention."""
    expired_results: int = 0
    """Kept results deleted because their ``keep_result_s`` had passed."""
    expired_attempts: int = 0
    """Attempts deleted because they ended longer than ``attempts_retention_s`` ago."""
    stale_workers: int = 0
    """Workers' rows deleted because they were not seen for ``worker_stale_s``."""
    flow_events: int = 0
    """Events of flows' tasks folded in (see :mod:`shardq.loops.resolver`)."""
    flow_released: int = 0
    """Tasks of flows released by those events: they wait for nothing more."""
    flow_cancelled: int = 0
    """Tasks of flows cancelled by them: a task they waited for will never succeed."""
    flows_finished: int = 0
    """Flows that ended in the pass: no task left."""
    expired_flows: int = 0
    """Flows deleted because they ended longer ago than their ``keep_result_s``."""
    expired_events: int = 0
    """Durable tasks' events deleted: emitted longer ago than ``event_keep_s``, or
    written by a park whose deadline passed (see :mod:`shardq.ops.durable`)."""
    expired_audit: int = 0
    """Rows of the audit trail deleted: older than ``audit_keep_s``."""
    expired_sessions: int = 0
    """The dashboard's sessions deleted: past their absolute expiry."""
    pauses_ended: int = 0
    """Pauses of queues cleared because their ``paused_until`` passed (claims hand out
    those queues' tasks from that time, cleared or not)."""

    def __add__(self, other: JanitorReport) -> JanitorReport:
        return JanitorReport(*(a + b for a, b in zip(astuple(self), astuple(other),
                                                     strict=True)))

    @property
    def total(self) -> int:
        """Rows changed in the pass."""
        return sum(astuple(self))


def _drain(st: Statements, name: str, bucket: int | None,
           count: Callable[[list[tuple[Any, ...]]], JanitorReport]) -> JanitorReport:
    """Repeat one bounded statement (on a bucket, or on a table without buckets) until a
    batch comes back short."""
    limit = st.config.janitor_batch
    query = st.query(name, limit)
    report = JanitorReport()
    while True:
        rows = st.all(query, {"bucket": bucket, "dead_retention_s": st.config.dead_retention_s})
        report += count(rows)
        if len(rows) < limit:
            return report


def _rescued(rows: list[tuple[Any, ...]]) -> JanitorReport:
    dead = sum(1 for row in rows if row[1] == "dead")
    return JanitorReport(rescued=len(rows) - dead, dead=dead)


def _promoted(rows: list[tuple[Any, ...]]) -> JanitorReport:
    return JanitorReport(promoted=len(rows))


def _purged(rows: list[tuple[Any, ...]]) -> JanitorReport:
    return JanitorReport(purged=len(rows))


def _expired(rows: list[tuple[Any, ...]]) -> JanitorReport:
    return JanitorReport(expired_results=len(rows))


# Old throughput counts, attempts and workers' rows are few, or expire in days or
# minutes, and a pause that ended holds up no claim: seeing to them once a minute is
# plenty.
PRUNE_EVERY_S = 60.0


def janitor_pass(st: Statements, *, prune: bool = True) -> JanitorReport:
    """One pass over every bucket of the schema, then over the expired results (and, with
    ``prune``, fold old throughput counts into minutes, :func:`shardq.ops.history.fold`,
    clear the pauses that ended, delete expired attempts and forget stale workers)."""
    report = JanitorReport()
    if prune:
        st.perform(history.fold(st))
    # One probe says which buckets have leases expired or head starts due; only those
    # are visited (a lease that expires meanwhile is found by the next pass).
    buckets = list(range(st.bucket_count))
    for bucket, expired, head_starts in st.all("janitor_due", {"buckets": buckets}):
        if head_starts:
            report += _drain(st, "janitor_promote", bucket, _promoted)
        if expired:
            report += _drain(st, "janitor_rescue", bucket, _rescued)
            if st.dialect.keyed_tasks:
                report += _drain(st, "janitor_rescue_keyed", bucket, _rescued)
    if st.config.dead_retention_s is not None:
        for bucket in buckets:
            report += _drain(st, "janitor_purge_dead", bucket, _purged)
    report += _drain(st, "janitor_results", None, _expired)
    # Dead tasks purged above may cancel tasks of flows that waited for them.
    folded = resolver.resolve(st)
    report += JanitorReport(flow_events=folded.events, flow_released=folded.released,
                            flow_cancelled=folded.cancelled, flows_finished=folded.finished)
    if prune:
        report += JanitorReport(expired_flows=resolver.purge(st, st.config.janitor_batch),
                                expired_events=_batches(st, durable.purge_events),
                                expired_audit=_batches(st, audit.purge),
                                expired_sessions=_batches(st, sessions.purge),
                                pauses_ended=len(st.perform(control.end_pauses(st))))
    if prune:
        # Workers are forgotten last: the rescues above still copied the names of the
        # dead ones into the attempts they ended.
        report += JanitorReport(expired_attempts=st.perform(attempts.purge(st)),
                                stale_workers=st.perform(workers.prune(st)))
    return report


def _batches(st: Statements, purge: Callable[[Statements, int], Plan[int]]) -> int:
    """Run a retention's bounded ``purge`` until a batch comes back short; how many rows
    it deleted (expired events, audit rows, sessions)."""
    limit, purged = st.config.janitor_batch, 0
    while True:
        n = st.perform(purge(st, limit))
        purged += n
        if n < limit:
            return purged


class HasStatements(Protocol):
    """Anything that runs statements for a schema: a :class:`shardq.Client`, say."""

    @property
    def statements(self) -> Statements:
        """The statements layer of its schema."""
        ...


class Janitor(Loop[JanitorReport]):
    """Runs :func:`janitor_pass` every ``interval_s`` in a background thread.

    ``Janitor(client)`` takes a :class:`shardq.Client` (or its :class:`Statements`);
    ``interval_s`` defaults to the client's ``janitor_interval_s`` setting.
    """

    def __init__(self, source: HasStatements | Statements,
                 interval_s: float | None = None) -> None:
        st = source if isinstance(source, Statements) else source.statements
        if interval_s is not None and not validate.seconds("interval_s", interval_s,
                                                           limit=DAY_S):
            raise InvalidTask("interval_s must be positive")
        super().__init__("shardq-janitor",
                         st.config.janitor_interval_s if interval_s is None else interval_s)
        self.statements = st
        self._pruned_at = float("-inf")

    def run_once(self) -> JanitorReport:
        """One pass over every bucket (pruning throughput counts once a minute)."""
        prune = time.monotonic() - self._pruned_at >= PRUNE_EVERY_S
        report = janitor_pass(self.statements, prune=prune)
        if prune:
            self._pruned_at = time.monotonic()
        return report
