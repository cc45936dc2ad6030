"""The library API: :class:`Client`."""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.core import embedded, validate
from shardq.core.clock import Clock
from shardq.core.config import DEFAULT_DEAD_LIST, ClientConfig, load
from shardq.core.db import Conn, Database
from shardq.core.dialect import Dialect
from shardq.core.errors import ConfigError, SchemaNotReady
from shardq.core.statements import Statements
from shardq.core.task import Task, TaskId, TaskInfo
from shardq.ops import (
    claims,
    control,
    deadletters,
    history,
    inspection,
    produce,
    queuestats,
    settle,
)
from shardq.ops.history import Minute
from shardq.ops.janitor import Janitor, JanitorReport, janitor_pass


class Client:
    """A connection to one shardq schema: enqueue, claim, settle and inspect tasks.

    ``Client()`` with no DSN and no ``SHARDQ_DSN`` uses the embedded PostgreSQL
    (started on first use, schema applied).  Settings not given as keywords come
    from ``SHARDQ_*`` environment variables, then :class:`ClientConfig` defaults.
    A Client is thread-safe; close it (or use ``with``) to release its connections.
    """

    def __init__(self, dsn: str | None = None, *, config: ClientConfig | None = None,
                 clock: Clock | None = None, **settings: Any) -> None:
        if config is None:
            config = load(ClientConfig, {"dsn": dsn, **settings})
        elif dsn is not None or settings:
            changes: dict[str, Any] = {**settings, **({"dsn": dsn} if dsn else {})}
            config = dataclasses.replace(config, **changes)
        self.config = config
        self.db = self._connect(config)
        self.statements = Statements(self.db, config, clock)
        """The statements layer the client's calls go through (for feature modules)."""
        self.clock: Clock = self.statements.clock
        layout = self.db.layout
        if config.bucket_count is not None and config.bucket_count != layout.bucket_count:
            self.db.close()
            raise ConfigError(
                f"bucket_count={config.bucket_count} was asked for, but the schema has "
                f"{layout.bucket_count} buckets (the count is fixed when the schema is created)"
            )
        self._rotation = itertools.count(random.randrange(layout.bucket_count))
        self._rotation_lock = threading.Lock()

    @staticmethod
    def _connect(config: ClientConfig) -> Database:
        if config.dsn:
            return Database.for_config(config.dsn, config)
        dsn = embedded.ensure_started()
        try:
            return Database.for_config(dsn, config)
        except SchemaNotReady:
            embedded.migrate(dsn, config.bucket_count)
            return Database.for_config(dsn, config)

    # -- lifecycle -----------------------------------------------------------

    @property
    def bucket_count(self) -> int:
        """How many buckets the schema has."""
        return self.db.layout.bucket_count

    @property
    def dialect(self) -> Dialect:
        """The engine the schema lives on (its ``name`` is 'postgresql' or 'cockroachdb')."""
        return self.db.layout.dialect

    def close(self) -> None:
        """Release the client's connections."""
        self.db.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- producing -----------------------------------------------------------

    def enqueue(self, queue: str, payload: Any, *, delay_s: float | None = None,
                run_at: datetime | None = None, priority: int = 0,
                max_attempts: int | None = None, key: str | None = None,
                conn: Conn | None = None) -> TaskId:
        """Add one task and return its id.

        ``delay_s``/``run_at`` give a not-before time; ``priority`` is seconds of
        head start over tasks enqueued up to that long before.  With ``key``, tasks
        of the same key never run at the same time and a re-enqueue of a waiting key
        updates that task (the returned id's ``coalesced`` says so).  With ``conn``
        the task is written in the caller's transaction and rolls back with it.
        """
        params = produce.placement(self.statements, queue, delay_s, run_at, priority,
                                   max_attempts)
        return produce.enqueue(self.statements, params, payload, key, conn)

    def enqueue_many(self, queue: str, payloads: Iterable[Any], *, delay_s: float | None = None,
                     run_at: datetime | None = None, priority: int = 0,
                     max_attempts: int | None = None, keys: Sequence[str | None] | None = None,
                     conn: Conn | None = None) -> list[TaskId]:
        """Add many tasks with the same options in one transaction; return their ids.

        ``keys`` (one per payload, None for unkeyed ones) coalesce like
        :meth:`enqueue`'s, duplicates within the batch included (the last payload wins).
        Unkeyed batches are written with COPY.
        """
        params = produce.placement(self.statements, queue, delay_s, run_at, priority,
                                   max_attempts)
        return produce.enqueue_many(self.statements, params, payloads, keys, conn)

    # -- consuming -----------------------------------------------------------

    def claim(self, queue: str, *, limit: int = 10, lease_s: float | None = None) -> list[Task]:
        """Claim up to ``limit`` eligible tasks from the next non-empty bucket.

        Buckets are visited round-robin, each call starting one bucket further; an
        empty result means every bucket was empty for this queue.
        """
        validate.claim(None, self.bucket_count, limit, lease_s)  # once, before any bucket
        with self._rotation_lock:
            start = next(self._rotation)
        n = self.bucket_count
        for step in range(n):
            tasks = self.claim_bucket(queue, (start + step) % n, limit=limit, lease_s=lease_s)
            if tasks:
                return tasks
        return []

    def claim_bucket(self, queue: str, bucket: int, *, limit: int = 10,
                     lease_s: float | None = None) -> list[Task]:
        """Claim up to ``limit`` eligible tasks of ``queue`` from one bucket (one statement)."""
        return claims.claim_bucket(self.statements, queue, bucket, limit=limit,
                                   lease_s=lease_s)

    # -- settling claimed tasks ------------------------------------------------

    def ack(self, task: Task) -> None:
        """Finish a task (delete it).  Raises LeaseLost if the lease moved on."""
        self.ack_many([task])

    def ack_many(self, tasks: Sequence[Task]) -> None:
        """Finish many tasks in one statement; LeaseLost names those whose lease moved on."""
        settle.ack(self.statements, tasks)

    def nack(self, task: Task, error: str | None = None, *,
             retry_in_s: float | None = None, dead: bool = False) -> None:
        """Record a failure: back in line after the backoff (or ``retry_in_s``), or dead.

        A task is dead when this was its last attempt, or at once with ``dead=True``.
        ``error`` is stored as :func:`shardq.core.validate.error_text` makes it: passwords
        masked, NULs removed, cut to 4,000 characters.
        """
        self.nack_many([task], [error], retry_in_s=[retry_in_s], dead=[dead])

    def nack_many(self, tasks: Sequence[Task], errors: Sequence[str | None] | None = None, *,
                  retry_in_s: Sequence[float | None] | None = None,
                  dead: Sequence[bool] | None = None) -> None:
        """Record failures of many tasks; the other arguments run parallel to ``tasks``."""
        settle.nack(self.statements, tasks, errors, retry_in_s, dead)

    def extend(self, task: Task, by_s: float) -> None:
        """Make the lease end ``by_s`` seconds from now (never sooner than it did)."""
        self.extend_many([task], by_s)

    def extend_many(self, tasks: Sequence[Task], by_s: float | Sequence[float]) -> None:
        """Extend many leases in one statement, by one length or by one per task; the
        tasks' exec_time is updated in place."""
        settle.extend(self.statements, tasks, by_s)

    def defer(self, task: Task, *, delay_s: float | None = None,
              run_at: datetime | None = None) -> None:
        """Give a task back without penalty, not to run before ``run_at`` / ``delay_s`` from now."""
        self.defer_many([task], delay_s=delay_s, run_at=run_at)

    def defer_many(self, tasks: Sequence[Task], *, delay_s: float | None = None,
                   run_at: datetime | None = None) -> None:
        """Defer many tasks in one statement."""
        settle.defer(self.statements, tasks, delay_s, run_at)

    def release(self, task: Task) -> None:
        """Give a task back without penalty, eligible at once."""
        self.defer_many([task], delay_s=0)

    def release_many(self, tasks: Sequence[Task]) -> None:
        """Release many tasks in one statement."""
        self.defer_many(tasks, delay_s=0)

    # -- inspecting and maintaining -------------------------------------------

    def get(self, task_id: UUID | str) -> TaskInfo | None:
        """Everything stored about one task, or None if it is gone (finished or purged)."""
        return inspection.get(self.statements, task_id)

    def stats(self, queue: str, *, slo_s: float | None = None) -> dict[str, Any]:
        """A queue's figures in bounded time: counts by state (``exact`` names the exact
        ones, ``error`` gives the others' ± tasks), the oldest eligible age, ``lag_s``,
        ``enqueued_per_s`` and ``completed_per_s`` over the last minute, ``drain_eta_s``
        and ``paused``; with ``slo_s`` (a process-by budget per task) also
        ``slo_breach_in_s`` and ``consumers_needed``.  See README "Queue figures"."""
        return queuestats.stats(self.statements, queue, slo_s).as_dict()

    def queues(self, *, slo_s: float | None = None) -> dict[str, dict[str, Any]]:
        """:meth:`stats` of every queue with tasks, paused, or active in the last hour."""
        return {q.queue: q.as_dict() for q in queuestats.queues(self.statements, slo_s)}

    def throughput(self, queue: str | None = None, *, minutes: int = 60) -> list[Minute]:
        """Tasks enqueued and completed per minute over the last ``minutes`` (at most 60),
        of ``queue`` or of every queue, the current minute last."""
        return history.series(self.statements, queue, minutes)

    def dead(self, queue: str, *, limit: int = DEFAULT_DEAD_LIST) -> list[TaskInfo]:
        """The newest dead tasks of ``queue``, with their last error and history."""
        return deadletters.listing(self.statements, queue, limit)

    def retry_dead(self, ids: Iterable[UUID | str] | None = None, *,
                   queue: str | None = None) -> list[UUID]:
        """Make dead tasks eligible now with fresh attempts: those ``ids``, or all of ``queue``.

        Returns the ids retried.  A keyed task whose key has a waiting task stays dead.
        """
        return deadletters.retry(self.statements, ids, queue)

    def purge_dead(self, queue: str, *, older_than_s: float = 0) -> int:
        """Delete ``queue``'s tasks that died more than ``older_than_s`` ago; returns the count."""
        return deadletters.purge(self.statements, queue, older_than_s)

    def run_janitor_once(self) -> JanitorReport:
        """One janitor pass over every bucket: promote due head starts, rescue expired leases."""
        return janitor_pass(self.statements)

    # -- controlling queues ----------------------------------------------------

    def pause(self, queue: str, *, create: bool = False) -> datetime:
        """Pause ``queue``: it keeps accepting tasks and hands out none until resumed.
        Returns when it was paused.  Running workers stop taking its tasks at their next
        claim.  A queue with no tasks, not paused and not active in the last hour is
        refused with :class:`shardq.UnknownQueue` (which lists the known ones): pass
        ``create=True`` to pause a queue before its first task arrives."""
        return control.pause(self.statements, queue, create=create)

    def resume(self, queue: str) -> bool:
        """Resume a paused ``queue``; returns whether it was paused.  A queue shardq does
        not know is refused with :class:`shardq.UnknownQueue`, as by :meth:`pause`."""
        return control.resume(self.statements, queue)

    def paused(self) -> dict[str, datetime]:
        """Every paused queue and when it was paused."""
        return control.paused(self.statements)

    def cancel(self, task_id: UUID | str) -> control.Cancelled:
        """Cancel a waiting or running task: its row is deleted.  A running task's handler
        sees ``shardq.current().cancelled`` at its worker's next heartbeat, and its result
        is dropped.  Dead and finished tasks are left alone (``status`` None)."""
        return control.cancel(self.statements, task_id)

    def purge(self, queue: str) -> int:
        """Delete every waiting task (due or scheduled) of ``queue``, in bounded batches;
        running and dead tasks stay.  Returns how many were deleted."""
        return control.purge(self.statements, queue)

    def janitor(self, interval_s: float | None = None) -> Janitor:
        """A :class:`Janitor` loop for this client's schema (start it with ``.start()``)."""
        return Janitor(self.statements, interval_s)
