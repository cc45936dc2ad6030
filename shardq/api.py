"""The client API, written once for :class:`shardq.Client` and :class:`shardq.AsyncClient`.

Each method of :class:`Operations` makes the :class:`~shardq.core.plan.Plan` of one
call (validating its arguments on the way) and is marked :class:`operation`.  Read from
a :class:`SyncRunner` (the Client) it is a plain method that runs the plan and returns
its value; read from an :class:`AsyncRunner` (the AsyncClient) it is a coroutine
function.  So the two clients share every method's signature, docstring, validation
and statements, and differ only in the runner beneath them.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload
from uuid import UUID

from shardq.core import validate
from shardq.core.adb import AsyncDatabase
from shardq.core.clock import Clock
from shardq.core.config import DEFAULT_DEAD_LIST, ClientConfig, load
from shardq.core.db import Database
from shardq.core.dialect import Dialect
from shardq.core.errors import ConfigError
from shardq.core.plan import Plan
from shardq.core.statements import Statements
from shardq.core.task import Attempt, Task, TaskId, TaskInfo, TaskResult
from shardq.ops import (
    attempts,
    claims,
    control,
    deadletters,
    inspection,
    produce,
    queuestats,
    results,
    settle,
    workers,
)
from shardq.ops import limits as flow
from shardq.ops.rates import Rate, rate_of
from shardq.ops.workers import WorkerInfo

P = ParamSpec("P")
T = TypeVar("T")


class SyncRunner(ABC):
    """Runs plans and returns their values (the blocking client)."""

    @abstractmethod
    def perform(self, plan: Plan[T]) -> T:
        """Run ``plan`` and return its value."""


class AsyncRunner(ABC):
    """Runs plans as coroutines (the asyncio client)."""

    @abstractmethod
    async def perform(self, plan: Plan[T]) -> T:
        """Run ``plan`` and return its value."""


class operation(Generic[P, T]):
    """A client method written once: the decorated function makes a call's plan; read
    from a client, the method runs that plan with the client's runner."""

    def __init__(self, make: Callable[Concatenate[Any, P], Plan[T]]) -> None:
        self.make = make
        # The method's name and docstring, for help() and the API reference.
        for name in functools.WRAPPER_ASSIGNMENTS:
            if hasattr(make, name):
                setattr(self, name, getattr(make, name))
        self.__wrapped__ = make

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> operation[P, T]: ...

    @overload
    def __get__(self, obj: SyncRunner, owner: type) -> Callable[P, T]: ...

    @overload
    def __get__(self, obj: AsyncRunner, owner: type
                ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        make, perform = self.make, obj.perform

        @functools.wraps(make)
        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return perform(make(obj, *args, **kwargs))

        # Kept on the instance, which is looked at before a non-data descriptor: the
        # next call skips this (the worker calls some of these thousands of times).
        obj.__dict__[self.name] = method
        return method


def resolve(dsn: str | None, config: ClientConfig | None,
            settings: dict[str, Any]) -> ClientConfig:
    """A client's settings: ``config`` with ``dsn`` and ``settings`` over it, or else
    those over the ``SHARDQ_*`` variables and the defaults."""
    if config is None:
        return load(ClientConfig, {"dsn": dsn, **settings})
    if dsn is not None or settings:
        return dataclasses.replace(config, **{**settings, **({"dsn": dsn} if dsn else {})})
    return config


class Operations:
    """The calls both clients offer, each made once (see the module's docstring)."""

    config: ClientConfig
    statements: Statements
    """The statements layer the client's calls go through (for feature modules)."""
    clock: Clock

    def _ready(self, db: Database | AsyncDatabase, clock: Clock | None) -> None:
        """Set up the calls over ``db``, now open, after checking its layout."""
        layout = db.layout
        asked = self.config.bucket_count
        if asked is not None and asked != layout.bucket_count:
            raise ConfigError(
                f"bucket_count={asked} was asked for, but the schema has "
                f"{layout.bucket_count} buckets (the count is fixed when the schema is created)")
        self.statements = Statements(db, self.config, clock)
        self.clock = self.statements.clock
        self._rotation = itertools.count(random.randrange(layout.bucket_count))
        self._rotation_lock = threading.Lock()
        # Per flow-controlled queue: the group this client's last claim served, so that
        # its claims go round the groups (shardq.ops.limits.claim_any).
        self._cursors: dict[str, str | None] = {}

    def _next_bucket(self) -> int:
        """The bucket the next :meth:`claim` starts at: one further each call."""
        with self._rotation_lock:
            return next(self._rotation) % self.bucket_count

    @property
    def bucket_count(self) -> int:
        """How many buckets the schema has."""
        return self.statements.bucket_count

    @property
    def dialect(self) -> Dialect:
        """The engine the schema lives on (its ``name`` is 'postgresql' or 'cockroachdb')."""
        return self.statements.dialect

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
                     conn: Any = None) -> Plan[list[TaskId]]:
        """Add many tasks with the same options in one transaction; return their ids.

        ``keys`` (one per payload, None for unkeyed ones) coalesce like
        :meth:`enqueue`'s, duplicates within the batch included (the last payload wins).
        ``group`` is every task's group.  Unkeyed batches are written with COPY.
        """
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
    def claim_turn(self, queue: str, bucket: int, *, after: str | None,
                   control: flow.Control, limit: int = 10, lease_s: float | None = None,
                   worker_id: UUID | str | None = None) -> Plan[flow.Turn]:
        """One claim of a flow-controlled queue under its limits: the ungrouped tasks of
        ``bucket`` (``after`` None), or the next group after ``after`` (see
        :func:`shardq.ops.limits.claim_turn`).  Workers use it; :meth:`claim` is the
        simpler call."""
        return flow.claim_turn(self.statements, queue, bucket, after=after,
                               control=control, limit=limit, lease_s=lease_s,
                               worker_id=validate.worker_id(worker_id))

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

    # -- inspecting ------------------------------------------------------------

    @operation
    def get(self, task_id: UUID | str) -> Plan[TaskInfo | None]:
        """Everything stored about one task, its attempts (``history``) included, or None
        if it is gone (finished or purged: :meth:`attempts` still reads its attempts)."""
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
    def purge_dead(self, queue: str, *, older_than_s: float = 0) -> Plan[int]:
        """Delete ``queue``'s tasks that died more than ``older_than_s`` ago; returns the
        count."""
        return deadletters.purge(self.statements, queue, older_than_s)

    # -- controlling queues ----------------------------------------------------

    @operation
    def pause(self, queue: str, *, create: bool = False) -> Plan[datetime]:
        """Pause ``queue``: it keeps accepting tasks and hands out none until resumed.
        Returns when it was paused.  Running workers stop taking its tasks at their next
        claim.  A queue with no tasks, not paused and not active in the last hour is
        refused with :class:`shardq.UnknownQueue` (which lists the known ones): pass
        ``create=True`` to pause a queue before its first task arrives."""
        return control.pause(self.statements, queue, create=create)

    @operation
    def resume(self, queue: str) -> Plan[bool]:
        """Resume a paused ``queue``; returns whether it was paused.  A queue shardq does
        not know is refused with :class:`shardq.UnknownQueue`, as by :meth:`pause`."""
        return control.resume(self.statements, queue)

    @operation
    def paused(self) -> Plan[dict[str, datetime]]:
        """Every paused queue and when it was paused."""
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
