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

from psycopg.errors import UniqueViolation
from psycopg.rows import args_row, dict_row

from shardq import deadletters, embedded, operations, sqlfiles, validate
from shardq import keys as keyed
from shardq.clock import Clock, DatabaseClock
from shardq.config import ClientConfig, load
from shardq.db import Conn, Database
from shardq.errors import ConfigError, SchemaNotReady
from shardq.janitor import JanitorReport, janitor_pass
from shardq.task import Task, TaskId, TaskInfo

# Claims return Task's fields in their declared order: positional construction, no dict.
TASK_ROW = args_row(Task)


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
        self.clock: Clock = clock or DatabaseClock()
        self.db = self._connect(config)
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
            return Database(config.dsn, max_size=config.pool_max_size)
        dsn = embedded.ensure_started()
        try:
            return Database(dsn, max_size=config.pool_max_size)
        except SchemaNotReady:
            embedded.migrate(dsn, config.bucket_count)
            return Database(dsn, max_size=config.pool_max_size)

    # -- lifecycle -----------------------------------------------------------

    @property
    def bucket_count(self) -> int:
        """How many buckets the schema has."""
        return self.db.layout.bucket_count

    @property
    def dialect(self) -> str:
        """'postgresql' or 'cockroachdb'."""
        return self.db.layout.dialect

    def close(self) -> None:
        """Release the client's connections."""
        self.db.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _params(self, **values: Any) -> dict[str, Any]:
        c = self.config
        return {"now": self.clock.now(), "backoff_base_s": c.backoff_base_s,
                "backoff_cap_s": c.backoff_cap_s, "backoff_jitter": c.backoff_jitter, **values}

    def _query(self, name: str, limit: int | None = None) -> Any:
        layout = self.db.layout
        return sqlfiles.query(name, layout.dialect, layout.bucket_column, limit)

    # -- producing -----------------------------------------------------------

    def _placement(self, queue: str, delay_s: float | None, run_at: datetime | None,
                   priority: int, max_attempts: int | None) -> dict[str, Any]:
        delay_s, run_at = validate.schedule(delay_s, run_at)
        return self._params(
            queue=validate.queue_name(queue), delay_s=delay_s, run_at=run_at,
            priority=validate.priority(priority),
            max_attempts=validate.max_attempts(max_attempts, self.config.max_attempts),
            notify=self.config.notify,
        )

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
        params = self._placement(queue, delay_s, run_at, priority, max_attempts)
        text = validate.payload_json(payload, self.config.max_payload_bytes)
        if key is not None:
            return keyed.enqueue_rows(self, conn, params, [key], [text])[0]
        params["payload"] = operations.jsonb(text)
        query = self._query("enqueue")

        def work(c: Conn) -> TaskId:
            row = c.execute(query, params).fetchone()
            assert row is not None
            return TaskId(row[0])

        return self.db.run(work, conn)

    def enqueue_many(self, queue: str, payloads: Iterable[Any], *, delay_s: float | None = None,
                     run_at: datetime | None = None, priority: int = 0,
                     max_attempts: int | None = None, keys: Sequence[str | None] | None = None,
                     conn: Conn | None = None) -> list[TaskId]:
        """Add many tasks with the same options in one transaction; return their ids.

        ``keys`` (one per payload, None for unkeyed ones) coalesce like
        :meth:`enqueue`'s, duplicates within the batch included (the last payload wins).
        Unkeyed batches are written with COPY.
        """
        params = self._placement(queue, delay_s, run_at, priority, max_attempts)
        limit = self.config.max_payload_bytes
        texts = [validate.payload_json(p, limit) for p in validate.as_list(payloads, "payloads")]
        if keys is not None and any(k is not None for k in
                                    operations.parallel("keys", keys, len(texts))):
            return keyed.enqueue_rows(self, conn, params, list(keys), texts)
        ids = TaskId.random_batch(len(texts))
        if not texts:
            return ids
        writer = operations.copy_tasks if self.dialect == "postgresql" else operations.insert_tasks

        def work(c: Conn) -> list[TaskId]:
            with c.transaction():
                writer(c, self._query, params, ids, texts)
            return ids

        return self.db.run(work, conn)

    # -- consuming -----------------------------------------------------------

    def claim(self, queue: str, *, limit: int = 10, lease_s: float | None = None) -> list[Task]:
        """Claim up to ``limit`` eligible tasks from the next non-empty bucket.

        Buckets are visited round-robin, each call starting one bucket further; an
        empty result means every bucket was empty for this queue.
        """
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
        validate.queue_name(queue)
        if not 0 <= bucket < self.bucket_count:
            raise ConfigError(f"bucket must be in [0, {self.bucket_count}), got {bucket}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigError(f"limit must be an integer in [1, 10000], got {limit!r}")
        lease = validate.seconds("lease_s", lease_s if lease_s is not None else self.config.lease_s)
        if not lease:
            raise ConfigError("lease_s must be positive")
        query = self._query("claim", limit)
        params = self._params(queue=queue, bucket=bucket, lease_s=lease)

        def work(c: Conn) -> list[Task]:
            try:
                return c.cursor(row_factory=TASK_ROW).execute(query, params).fetchall()
            except UniqueViolation:
                # Two claims raced for two tasks of one key; tasks_running_keys let one
                # win.  This bucket is simply tried again later.
                return []

        return self.db.run(work)

    # -- settling claimed tasks ------------------------------------------------

    def ack(self, task: Task) -> None:
        """Finish a task (delete it).  Raises LeaseLost if the lease moved on."""
        self.ack_many([task])

    def ack_many(self, tasks: Sequence[Task]) -> None:
        """Finish many tasks in one statement; LeaseLost names those whose lease moved on."""
        operations.settle(self, "ack_many", tasks, {})

    def nack(self, task: Task, error: str | None = None, *,
             retry_in_s: float | None = None, dead: bool = False) -> None:
        """Record a failure: back in line after the backoff (or ``retry_in_s``), or dead.

        A task is dead when this was its last attempt, or at once with ``dead=True``.
        """
        self.nack_many([task], [error], retry_in_s=[retry_in_s], dead=[dead])

    def nack_many(self, tasks: Sequence[Task], errors: Sequence[str | None] | None = None, *,
                  retry_in_s: Sequence[float | None] | None = None,
                  dead: Sequence[bool] | None = None) -> None:
        """Record failures of many tasks; the other arguments run parallel to ``tasks``."""
        n = len(tasks)
        errs = operations.parallel("errors", errors, n)
        delays = [validate.seconds("retry_in_s", d) for d in operations.parallel(
            "retry_in_s", retry_in_s, n)]
        kill = [bool(d) for d in operations.parallel("dead", dead, n)]
        # Keyed tasks that retry merge with their follow-up; the rest are one UPDATE.
        merge = [i for i, t in enumerate(tasks)
                 if t.key is not None and not kill[i] and not t.is_last_attempt]
        operations.settle_split(
            self, tasks, merge,
            lambda rest: ("nack_many", {"errors": [errs[i] for i in rest],
                                        "retry_in_s": [delays[i] for i in rest],
                                        "dead": [kill[i] for i in rest]}),
            lambda group: keyed.putback(
                self, group, run_at=[None] * len(group),
                delays_s=[delays[i] for i in merge], use_backoff=[delays[i] is None for i in merge],
                errors=[errs[i] for i in merge], keep_errors=False, attempt_change=0))

    def extend(self, task: Task, by_s: float) -> None:
        """Make the lease end ``by_s`` seconds from now (never sooner than it did)."""
        self.extend_many([task], by_s)

    def extend_many(self, tasks: Sequence[Task], by_s: float) -> None:
        """Extend many leases in one statement; the tasks' exec_time is updated in place."""
        by = validate.seconds("by_s", by_s)
        operations.settle(self, "extend_many", tasks, {"by_s": [by] * len(tasks)})

    def defer(self, task: Task, *, delay_s: float | None = None,
              run_at: datetime | None = None) -> None:
        """Give a task back without penalty, not to run before ``run_at`` / ``delay_s`` from now."""
        self.defer_many([task], delay_s=delay_s, run_at=run_at)

    def defer_many(self, tasks: Sequence[Task], *, delay_s: float | None = None,
                   run_at: datetime | None = None) -> None:
        """Defer many tasks in one statement."""
        delay_s, run_at = validate.schedule(delay_s, run_at)
        merge = [i for i, t in enumerate(tasks) if t.key is not None]
        operations.settle_split(
            self, tasks, merge,
            lambda rest: ("requeue_many", {"run_ats": [run_at] * len(rest),
                                           "delays_s": [delay_s or 0.0] * len(rest)}),
            lambda group: keyed.putback(
                self, group, run_at=[run_at] * len(group), delays_s=[delay_s] * len(group),
                use_backoff=[False] * len(group), errors=[None] * len(group), keep_errors=True,
                attempt_change=-1))

    def release(self, task: Task) -> None:
        """Give a task back without penalty, eligible at once."""
        self.defer_many([task], delay_s=0)

    def release_many(self, tasks: Sequence[Task]) -> None:
        """Release many tasks in one statement."""
        self.defer_many(tasks, delay_s=0)

    # -- inspecting and maintaining -------------------------------------------

    def get(self, task_id: UUID | str) -> TaskInfo | None:
        """Everything stored about one task, or None if it is gone (finished or purged)."""
        try:
            tid = task_id if isinstance(task_id, UUID) else UUID(str(task_id))
        except ValueError:
            raise ConfigError(f"not a task id: {task_id!r}") from None
        query = self._query("get")
        params = self._params(id=tid, bucket_count=self.bucket_count)

        def work(c: Conn) -> TaskInfo | None:
            row = c.cursor(row_factory=dict_row).execute(query, params).fetchone()
            return TaskInfo(**row) if row else None

        return self.db.run(work)

    def stats(self, queue: str) -> dict[str, Any]:
        """Counts by state (available, scheduled, locked, dead) and the oldest eligible age."""
        params = self._params(queue=validate.queue_name(queue))
        query = self._query("stats")

        def work(c: Conn) -> dict[str, Any]:
            row = c.cursor(row_factory=dict_row).execute(query, params).fetchone()
            return dict(row) if row else dict(operations.EMPTY_STATS)

        return self.db.run(work)

    def dead(self, queue: str, *, limit: int = 100) -> list[TaskInfo]:
        """The newest dead tasks of ``queue``, with their last error and history."""
        return deadletters.listing(self, queue, limit)

    def retry_dead(self, ids: Iterable[UUID | str] | None = None, *,
                   queue: str | None = None) -> list[UUID]:
        """Make dead tasks eligible now with fresh attempts: those ``ids``, or all of ``queue``.

        Returns the ids retried.  A keyed task whose key has a waiting task stays dead.
        """
        return deadletters.retry(self, ids, queue)

    def purge_dead(self, queue: str, *, older_than_s: float = 0) -> int:
        """Delete ``queue``'s tasks that died more than ``older_than_s`` ago; returns the count."""
        return deadletters.purge(self, queue, older_than_s)

    def run_janitor_once(self) -> JanitorReport:
        """One janitor pass over every bucket: promote due head starts, rescue expired leases."""
        return janitor_pass(self)
