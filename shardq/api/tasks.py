"""The calls of a task's life: enqueue, claim and settle (:class:`TaskCalls`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.api.base import Base
from shardq.api.operation import operation
from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan
from shardq.core.task import Task, TaskId
from shardq.flows.canvas import Signature
from shardq.ops import batches, claims, flow, handover, produce, settle


class TaskCalls(Base):
    """Enqueueing, claiming and settling tasks."""

    # -- producing -----------------------------------------------------------

    @operation
    def enqueue(self, queue: str, payload: Any, *, delay_s: float | None = None,
                run_at: datetime | None = None, priority: int = 0,
                max_attempts: int | None = None, key: str | None = None,
                group: str | None = None, conn: Any = None) -> Plan[TaskId]:
        """Add one task and return its id.

        ``delay_s``/``run_at`` give a not-before time; ``priority`` is seconds of
        head start over tasks enqueued up to that long before.  With ``key``, tasks
        of the same key never run at the same time and a re-enqueue of a waiting key
        updates that task (the returned id's ``coalesced`` says so).  ``group`` (a
        tenant, a customer) is the unit of fairness and of per-group limits: groups
        with waiting tasks take turns (see :meth:`set_limits`).  With ``conn`` (a
        psycopg ``Connection``; an ``AsyncConnection`` for the AsyncClient) the task is
        written in the caller's transaction and rolls back with it.
        """
        params = produce.placement(self.statements, queue, delay_s, run_at, priority,
                                   max_attempts, group)
        return produce.enqueue(self.statements, params, payload, key, conn)

    @operation
    def enqueue_many(self, queue: str, payloads: Iterable[Any], *,
                     delay_s: float | None = None, run_at: datetime | None = None,
                     priority: int = 0, max_attempts: int | None = None,
                     keys: Sequence[str | None] | None = None, group: str | None = None,
                     conn: Any = None, on_complete: Signature | None = None
                     ) -> Plan[list[TaskId]]:
        """Add many tasks with the same options in one transaction; return their ids.

        ``keys`` (one per payload, None for unkeyed ones) coalesce like
        :meth:`enqueue`'s, duplicates within the batch included (the last payload wins).
        ``group`` is every task's group.  Unkeyed batches are written with COPY.

        ``on_complete`` (a signature, ``fn.s(...)``) runs once, when every task of the
        batch ended: it takes the batch's counts as its first argument (``{"flow": id,
        "succeeded": n, "dead": n, "cancelled": n}``; ``fn.si`` takes none).  The ids
        returned then also carry ``flow_id`` and ``callback_id`` (see
        :class:`shardq.ops.batches.BatchIds`); such a batch takes no keys.
        """
        if on_complete is not None:
            if keys is not None and any(k is not None for k in keys):
                raise InvalidTask("a batch with on_complete takes no keys: a keyed task may "
                                  "merge with another task of its key")
            return batches.enqueue(self.statements, queue, payloads, delay_s=delay_s,
                                   run_at=run_at, priority=priority, max_attempts=max_attempts,
                                   group=group, on_complete=on_complete, conn=conn)
        params = produce.placement(self.statements, queue, delay_s, run_at, priority,
                                   max_attempts, group)
        return produce.enqueue_many(self.statements, params, payloads, keys, conn)

    # -- consuming -----------------------------------------------------------

    @operation
    def claim(self, queue: str, *, limit: int = 10, lease_s: float | None = None,
              worker_id: UUID | str | None = None) -> Plan[list[Task]]:
        """Claim up to ``limit`` eligible tasks from the next non-empty bucket.

        Buckets are visited round-robin, each call starting one bucket further; an
        empty result means every bucket was empty for this queue.  A queue with limits
        or groups (see :meth:`set_limits`) is claimed under them, a turn at a time.
        ``worker_id`` (a uuid) names the claimer in the tasks' attempts: ``shardq
        consume`` passes its own, and a row of ``shardq.workers`` with that id gives its
        name, host and pid.
        """
        validate.claim(None, self.bucket_count, limit, lease_s)  # once, before any bucket
        return flow.claim_any(self.statements, queue, self._next_bucket(), limit=limit,
                              lease_s=lease_s, cursors=self._cursors,
                              worker_id=validate.worker_id(worker_id))

    @operation
    def claim_bucket(self, queue: str, bucket: int, *, limit: int = 10,
                     lease_s: float | None = None,
                     worker_id: UUID | str | None = None) -> Plan[list[Task]]:
        """Claim up to ``limit`` eligible tasks of ``queue`` from one bucket (one
        statement); ``worker_id`` as for :meth:`claim`."""
        return claims.claim_bucket(self.statements, queue, bucket, limit=limit,
                                   lease_s=lease_s, worker_id=validate.worker_id(worker_id))

    @operation
    def claim_buckets(self, queue: str, buckets: Sequence[int], *, limit: int = 10,
                      lease_s: float | None = None,
                      worker_id: UUID | str | None = None) -> Plan[list[Task]]:
        """Claim up to ``limit`` eligible tasks of ``queue`` from the ``buckets`` listed,
        in their order (one statement, one index range per bucket read); ``worker_id``
        as for :meth:`claim`.  A worker claims so the buckets that a burst of enqueue
        notifications named.  A queue with limits or groups yields nothing here, as
        with :meth:`claim_bucket`."""
        return claims.claim_buckets(self.statements, queue, buckets, limit=limit,
                                    lease_s=lease_s, worker_id=validate.worker_id(worker_id))

    @operation
    def claim_turn(self, queue: str, bucket: int, *, after: str | None,
                   control: flow.Control, limit: int = 10, lease_s: float | None = None,
                   worker_id: UUID | str | None = None) -> Plan[flow.Turn]:
        """One claim of a flow-controlled queue under its limits: the ungrouped tasks of
        ``bucket`` (``after`` None), or the next group after ``after`` (see
        :func:`shardq.ops.flow.claim_turn`).  Workers use it; :meth:`claim` is the
        simpler call."""
        return flow.claim_turn(self.statements, queue, bucket, after=after,
                               control=control, limit=limit, lease_s=lease_s,
                               worker_id=validate.worker_id(worker_id))

    @operation
    def ack_and_claim(self, tasks: Sequence[Task], queue: str, bucket: int, *,
                      control: flow.Control, limit: int = 10, lease_s: float | None = None,
                      worker_id: UUID | str | None = None) -> Plan[handover.Handed]:
        """Finish ``tasks`` and take a turn of ``queue``'s ungrouped tasks in ``bucket``
        (as :meth:`claim_turn`) in one transaction: the running-limit slots the acks
        free go straight to the tasks claimed (see :mod:`shardq.ops.handover`).  Tasks
        whose lease was lost are named in the result's ``lost``, not raised: the
        claimed tasks are the caller's either way."""
        return handover.ack_and_claim(self.statements, tasks, None, queue, bucket,
                                      control=control, limit=limit, lease_s=lease_s,
                                      worker_id=validate.worker_id(worker_id))

    # -- settling claimed tasks ------------------------------------------------

    @operation
    def ack(self, task: Task) -> Plan[None]:
        """Finish a task (delete it).  Raises LeaseLost if the lease moved on."""
        return settle.ack(self.statements, [task])

    @operation
    def ack_many(self, tasks: Sequence[Task]) -> Plan[None]:
        """Finish many tasks in one statement; LeaseLost names those whose lease moved on."""
        return settle.ack(self.statements, tasks)

    @operation
    def nack(self, task: Task, error: str | None = None, *,
             retry_in_s: float | None = None, dead: bool = False) -> Plan[None]:
        """Record a failure: back in line after the backoff (or ``retry_in_s``), or dead.

        A task is dead when this was its last attempt, or at once with ``dead=True``.
        ``error`` is stored as :func:`shardq.core.validate.error_text` makes it:
        passwords masked, NULs removed, cut to 4,000 characters.
        """
        return settle.nack(self.statements, [task], [error], [retry_in_s], [dead])

    @operation
    def nack_many(self, tasks: Sequence[Task], errors: Sequence[str | None] | None = None, *,
                  retry_in_s: Sequence[float | None] | None = None,
                  dead: Sequence[bool] | None = None) -> Plan[None]:
        """Record failures of many tasks; the other arguments run parallel to ``tasks``."""
        return settle.nack(self.statements, tasks, errors, retry_in_s, dead)

    @operation
    def extend(self, task: Task, by_s: float) -> Plan[None]:
        """Make the lease end ``by_s`` seconds from now (never sooner than it did)."""
        return settle.extend(self.statements, [task], by_s)

    @operation
    def extend_many(self, tasks: Sequence[Task], by_s: float | Sequence[float]) -> Plan[None]:
        """Extend many leases in one statement, by one length or by one per task; the
        tasks' exec_time is updated in place."""
        return settle.extend(self.statements, tasks, by_s)

    @operation
    def defer(self, task: Task, *, delay_s: float | None = None,
              run_at: datetime | None = None) -> Plan[None]:
        """Give a task back without penalty, not to run before ``run_at`` / ``delay_s`` from
        now."""
        return settle.defer(self.statements, [task], delay_s, run_at)

    @operation
    def defer_many(self, tasks: Sequence[Task], *, delay_s: float | None = None,
                   run_at: datetime | None = None) -> Plan[None]:
        """Defer many tasks in one statement."""
        return settle.defer(self.statements, tasks, delay_s, run_at)

    @operation
    def release(self, task: Task) -> Plan[None]:
        """Give a task back without penalty, eligible at once."""
        return settle.defer(self.statements, [task], 0, None)

    @operation
    def release_many(self, tasks: Sequence[Task]) -> Plan[None]:
        """Release many tasks in one statement."""
        return settle.defer(self.statements, tasks, 0, None)
