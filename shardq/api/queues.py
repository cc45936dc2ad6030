"""The calls about queues: their limits, reading tasks and figures back, dead letters,
and pausing, resuming and purging queues (:class:`QueueCalls`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.api.base import Base
from shardq.api.operation import operation
from shardq.core.config import DEFAULT_DEAD_LIST
from shardq.core.plan import Plan
from shardq.core.task import Attempt, TaskInfo, TaskResult
from shardq.ops import (
    attempts,
    control,
    deadletters,
    flow,
    inspection,
    queuestats,
    reshard,
    results,
    workers,
)
from shardq.ops.rates import Rate, rate_of
from shardq.ops.workers import WorkerInfo


class QueueCalls(Base):
    """Flow control, inspection and control of queues."""

    # -- flow control ------------------------------------------------------------

    @operation
    def set_limits(self, queue: str, *, max_running: int | None = None,
                   max_running_per_group: int | None = None,
                   rate: Rate | str | None = None,
                   rate_per_group: Rate | str | None = None,
                   create: bool = False) -> Plan[flow.Limits]:
        """Set ``queue``'s limits, replacing all earlier ones (call with none to clear
        them); every worker applies them at its next claim.

        ``max_running`` caps the queue's running tasks across every worker,
        ``max_running_per_group`` each group's (each from 1 to a million:
        :data:`shardq.core.validate.MAX_RUNNING`);
        ``rate``/``rate_per_group`` cap claims per period (:class:`shardq.Rate`, or its
        text ``"COUNT/PERIOD_S[/BURST]"`` as the CLI takes it).  The database keeps them:
        capacity comes back when a task ends or its lease expires, whatever happened to
        its worker.  A queue without limits that has no tasks, is not paused and was not
        active in the last hour is refused with :class:`shardq.UnknownQueue` (a typo,
        most likely): pass ``create=True`` to limit a queue before its first task.
        """
        return flow.set_limits(self.statements, queue, flow.Limits(
            max_running, max_running_per_group, rate_of("rate", rate),
            rate_of("rate_per_group", rate_per_group)), create=create)

    @operation
    def limits(self, queue: str) -> Plan[flow.Control]:
        """``queue``'s limits and how much of them is in use (:class:`shardq.Control`)."""
        return flow.control(self.statements, queue)

    @operation
    def controls(self, queues: Sequence[str]) -> Plan[dict[str, flow.Control]]:
        """:meth:`limits` of several queues in one statement."""
        return flow.controls(self.statements, queues)

    # -- inspecting ------------------------------------------------------------

    @operation
    def get(self, task_id: UUID | str) -> Plan[TaskInfo | None]:
        """Everything stored about one task, its attempts (``history``) included, and a
        durable task's checkpointed calls (``steps``) and what it waits for while parked
        (``waiting_for``); or None if it is gone (finished or purged: :meth:`attempts`
        still reads its attempts).  The record is of one moment: a claim or a settle
        that commits while it is read is in all of it or in none of it."""
        return inspection.get(self.statements, task_id)

    @operation
    def attempts(self, task_id: UUID | str) -> Plan[list[Attempt]]:
        """A task's attempts, oldest first, the running one last: when each was claimed,
        by which worker, how it ended, its error.  They outlive the task for
        ``attempts_retention_s``; a task that succeeded at its first attempt has none."""
        return attempts.attempts(self.statements, task_id)

    @operation
    def workers(self) -> Plan[list[WorkerInfo]]:
        """The registered ``shardq consume`` processes: alive (seen within
        ``worker_stale_s``) or not yet forgotten, with the tasks each holds now."""
        return workers.listing(self.statements)

    @operation
    def reshard_status(self) -> Plan[reshard.ReshardStatus]:
        """The layout in use (its bucket count and generation) and the progress of a
        reshard under way: its phase, the index builds running, the workers a switch
        still waits for (see :meth:`shardq.Client.reshard`)."""
        return reshard.status(self.statements)

    @operation
    def result(self, task_id: UUID | str, *, wait_s: float = 0.0) -> Plan[TaskResult]:
        """What became of a task: ``status`` is "pending", "running", "succeeded" (with the
        handler's return value, kept for its ``keep_result_s``), "failed" (dead, with its
        last error) or "unknown" (see :class:`shardq.TaskResult`).

        With ``wait_s``, wait up to that long for the task to succeed or fail, and return
        what it is then.  On PostgreSQL the ack wakes the call at once (LISTEN/NOTIFY),
        and a task that dies is seen within a second; on CockroachDB (or with
        ``notify`` off) the call looks again after pauses of 10 ms doubling up to 1 s.
        A waiting call holds no pooled connection while it waits (each look is a short
        statement): every waiting call shares the client's one listening connection.
        A ``task_id`` that is not a uuid raises :class:`shardq.InvalidTask`.
        """
        return results.result(self.statements, task_id, wait_s)

    @operation
    def stats(self, queue: str, *, slo_s: float | None = None) -> Plan[dict[str, Any]]:
        """A queue's figures in bounded time: counts by state (``exact`` names the exact
        ones, ``error`` gives the others' ± tasks), the oldest eligible age, ``lag_s``,
        ``enqueued_per_s`` and ``completed_per_s`` over the last minute, ``drain_eta_s``
        and ``paused``; with ``slo_s`` (a process-by budget per task) also
        ``slo_breach_in_s`` and ``consumers_needed``.  See README "Queue figures"."""
        return queuestats.stats_dict(self.statements, queue, slo_s)

    @operation
    def queues(self, *, slo_s: float | None = None) -> Plan[dict[str, dict[str, Any]]]:
        """:meth:`stats` of every queue with tasks, paused, or active in the last hour."""
        return queuestats.queues_dict(self.statements, slo_s)

    @operation
    def dead(self, queue: str, *, limit: int = DEFAULT_DEAD_LIST) -> Plan[list[TaskInfo]]:
        """The newest dead tasks of ``queue``, with their last error and history."""
        return deadletters.listing(self.statements, queue, limit)

    @operation
    def retry_dead(self, ids: Iterable[UUID | str] | None = None, *,
                   queue: str | None = None) -> Plan[list[UUID]]:
        """Make dead tasks eligible now with fresh attempts: those ``ids``, or all of
        ``queue``.  Returns the ids retried.  A keyed task whose key has a waiting task
        stays dead."""
        return deadletters.retry(self.statements, ids, queue)

    @operation
    def redrive_dead(self, queue: str, *, error: str | None = None,
                     older_than_s: float | None = None, newer_than_s: float | None = None,
                     dry_run: bool = False, limit: int = 1000) -> Plan[deadletters.Redriven]:
        """Make eligible again, as :meth:`retry_dead` does, up to ``limit`` (at most
        10,000) dead tasks of ``queue``: those whose last error contains ``error`` (any
        case, a plain substring), that died more than ``older_than_s`` and less than
        ``newer_than_s`` seconds ago.  Returns ``count`` and ``more`` (the limit was
        reached: call again for the rest).  With ``dry_run=True`` nothing changes:
        ``count`` is how many match (``more``: at least that many)."""
        return deadletters.redrive(self.statements, queue, error=error,
                                   older_than_s=older_than_s, newer_than_s=newer_than_s,
                                   dry_run=dry_run, limit=limit)

    @operation
    def purge_dead(self, queue: str, *, older_than_s: float = 0) -> Plan[int]:
        """Delete ``queue``'s tasks that died more than ``older_than_s`` ago; returns the
        count."""
        return deadletters.purge(self.statements, queue, older_than_s)

    # -- controlling queues ----------------------------------------------------

    @operation
    def pause(self, queue: str, *, until: datetime | None = None,
              create: bool = False) -> Plan[datetime]:
        """Pause ``queue``: it keeps accepting tasks and hands out none until resumed, or
        with ``until`` (a timezone-aware time to come) until then: claims hand out its
        tasks again from that time, with no one resuming it.  A pause without ``until``
        is open-ended, even on a queue paused until some time.  Returns when it was
        paused (the first pause's time when it already was).  Running workers stop
        taking its tasks at their next claim.  A queue with no tasks, not paused and not
        active in the last hour is refused with :class:`shardq.UnknownQueue` (which
        lists the known ones): pass ``create=True`` to pause a queue before its first
        task arrives."""
        return control.pause(self.statements, queue, until=until, create=create)

    @operation
    def resume(self, queue: str) -> Plan[bool]:
        """Resume a paused ``queue``; returns whether it was paused.  A queue shardq does
        not know is refused with :class:`shardq.UnknownQueue`, as by :meth:`pause`."""
        return control.resume(self.statements, queue)

    @operation
    def paused(self) -> Plan[dict[str, datetime]]:
        """Every paused queue and when it was paused (a pause whose ``until`` passed has
        ended; :meth:`stats` gives ``paused_until``)."""
        return control.paused(self.statements)

    @operation
    def cancel(self, task_id: UUID | str) -> Plan[control.Cancelled]:
        """Cancel a waiting or running task: its row is deleted.  A running task's handler
        sees ``shardq.current().cancelled`` at its worker's next heartbeat, and its result
        is dropped.  Dead and finished tasks are left alone (``status`` None)."""
        return control.cancel(self.statements, task_id)

    @operation
    def purge(self, queue: str) -> Plan[int]:
        """Delete every waiting task (due or scheduled) of ``queue``, in bounded batches;
        running and dead tasks stay.  Returns how many were deleted."""
        return control.purge(self.statements, queue)
