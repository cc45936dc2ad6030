"""``write_tasks``: from a Spark DataFrame to tasks in shardq.tasks through Spark's JDBC writer."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shardq.core.config import ClientConfig, load
from shardq.core.db import Database
from shardq.core.errors import ConfigError
from shardq.core.statements import Statements
from shardq.core.task import TaskId
from shardq.flows.canvas import Signature
from shardq.spark import complete, failure, frame, merge
from shardq.spark.jdbc import jdbc_target, libpq_url, writer_options

MODES = ("append", "idempotent")
TASKS_TABLE = "shardq.tasks"


@dataclass(frozen=True)
class WriteResult:
    """What :func:`write_tasks` did.

    ``path`` is ``"direct"`` (rows appended to shardq.tasks as they were) or ``"staged"``
    (written to a staging table, then merged).  For a staged write: ``staged`` rows
    Spark wrote (a retried Spark task may have written some twice), ``tasks`` the merge
    inserted or coalesced into a waiting task of their key, and in idempotent mode
    ``fresh``, the distinct ids the ledger had not seen (rows whose id it had seen
    were skipped).  A direct write counts nothing (that would cost Spark another pass).
    With ``on_complete``: ``flow_id``, the batch's flow, and ``callback_id``, the task
    ``on_complete`` runs as (whose result is the flow's); both None when the write
    inserted nothing new (the ledger held every row), and so has no callback.
    """

    mode: str
    path: str
    staged: int | None = None
    tasks: int | None = None
    fresh: int | None = None
    flow_id: TaskId | None = None
    callback_id: TaskId | None = None


def write_tasks(df: Any, *, url: str | None = None, dsn: str | None = None,
                queue: frame.ColumnLike, payload: frame.ColumnLike | Sequence[str],
                run_at: frame.ColumnLike | None = None,
                priority: frame.ColumnLike | int | None = None,
                key: frame.ColumnLike | None = None,
                max_attempts: frame.ColumnLike | int | None = None,
                group: frame.ColumnLike | None = None,
                mode: str = "append", batch_size: int | None = None,
                num_partitions: int | None = None, id_columns: Sequence[str] | None = None,
                id_namespace: uuid.UUID | None = None,
                jdbc_options: Mapping[str, str] | None = None,
                trace_context: frame.ColumnLike | None = None,
                on_complete: Signature | None = None) -> WriteResult:
    """Write one task per row of ``df`` with Spark's JDBC writer.

    - ``dsn``: the database, a libpq URL (``postgresql://user:pass@host:5432/db``;
      ``cockroachdb://`` for CockroachDB), else ``SHARDQ_DSN``.  ``url``: the address the
      executors use if it differs (a libpq or ``jdbc:postgresql://`` URL).  JDBC needs
      TCP: the embedded PostgreSQL's unix socket cannot be used.
    - ``queue``: a queue name for every row, or a Column of names.
    - ``payload``: a JSON string column, a struct/map/array column, or a list of column
      names packed as ``to_json(struct(...))`` (timestamps in UTC, nulls kept).
    - ``run_at`` (a timestamp column; TimestampNTZ is read as UTC), ``priority`` and
      ``max_attempts`` (int columns or one value), ``key`` (a string column): as in
      :meth:`shardq.Client.enqueue`, per row; nulls mean "not given".  Rows of one key
      coalesce: the last in the DataFrame's order wins, and a waiting task of the key
      takes its payload and keeps the earlier place in line.
    - ``group``: one group for every row (a name), or a Column of each row's group (nulls:
      none), the unit of fairness and of per-group limits (:meth:`shardq.Client.set_limits`).
    - ``trace_context``: a string column of W3C ``traceparent`` values (``F.lit(...)``
      for one), stored with the tasks: with tracing on, each handler's span joins that
      trace (see :mod:`shardq.contrib.opentelemetry`).  Not part of a task's default
      idempotent id.
    - ``mode="append"``: plain rows (no key, run_at or priority) go straight into
      shardq.tasks on PostgreSQL, one transaction per partition (a failed job leaves the
      partitions that committed before it); others, and every row on CockroachDB,
      through an unlogged staging table merged in one transaction (a failed job
      leaves nothing).  ``mode="idempotent"``: every row gets a
      deterministic id (uuid5 of ``queue`` and ``id_columns``, by default of the whole
      task), and the merge skips ids the ledger ``shardq.spark_ledger`` has seen:
      Spark task retries and re-runs of the job insert nothing twice.
    - The role needs INSERT on shardq.tasks, and for staged writes CREATE on the schema
      shardq (the staging table lives there).
    - A failed write raises :class:`shardq.SparkWriteError`, one line naming the
      argument and the rule a refused row broke (``payload: must not be null``), with
      Spark's error as its ``__cause__``.
    - ``batch_size`` rows per JDBC batch (default 5000 on PostgreSQL, 128 on
      CockroachDB); ``num_partitions`` parallel writers (coalesce or repartition);
      ``jdbc_options`` override any writer option.
    - ``on_complete`` (a signature, ``fn.s(...)``): the tasks written form one batch, as
      in :meth:`shardq.Client.enqueue_many`, and ``on_complete`` runs once, when every
      one of them ended, with the batch's counts as its first argument (``{"flow": id,
      "succeeded": n, "dead": n, "cancelled": n}``; ``fn.si`` takes none).  The write is
      then staged, and the merge's transaction writes the callback too, waiting for
      exactly the tasks it inserted: a failed write leaves no callback, and a write
      whose every row the ledger held (``mode="idempotent"`` run again) inserts no task
      and writes no callback.  Such a write takes no ``key``.
    """
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
    if id_columns is not None and mode != "idempotent":
        raise ConfigError("id_columns only apply to mode='idempotent'")
    complete.refuse(on_complete, key)
    return write_frame(df, url=url, dsn=dsn, queue=queue, payload=payload, run_at=run_at,
                       priority=priority, key=key, max_attempts=max_attempts, group=group,
                       mode=mode,
                       batch_size=batch_size, num_partitions=num_partitions,
                       id_columns=id_columns, id_namespace=id_namespace,
                       jdbc_options=jdbc_options, trace_context=trace_context,
                       on_complete=on_complete)


def write_frame(df: Any, *, url: str | None, dsn: str | None, queue: frame.ColumnLike,
                payload: frame.ColumnLike | Sequence[str], run_at: frame.ColumnLike | None,
                priority: frame.ColumnLike | int | None, key: frame.ColumnLike | None,
                max_attempts: frame.ColumnLike | int | None,
                group: frame.ColumnLike | None, mode: str,
                batch_size: int | None, num_partitions: int | None,
                id_columns: Sequence[str] | None, id_namespace: uuid.UUID | None,
                jdbc_options: Mapping[str, str] | None,
                batch: uuid.UUID | None = None,
                trace_context: frame.ColumnLike | None = None,
                on_complete: Signature | None = None,
                flow_name: str | None = None) -> WriteResult:
    """:func:`write_tasks` with its arguments checked; ``batch`` (a stream's micro-batch
    ledger id) makes the staged merge all-or-nothing on that id (``mode="idempotent"``,
    ids from ``id_columns``, which then need not be unique beyond the batch);
    ``flow_name`` names the flow of ``on_complete``'s batch."""
    F = frame.functions()
    if num_partitions is not None and num_partitions < 1:
        raise ConfigError(f"num_partitions must be positive, got {num_partitions}")
    config = load(ClientConfig, {"dsn": dsn})
    driver_dsn, target = _addresses(url, dsn, jdbc_options)
    st = _statements(config, driver_dsn)
    try:
        dialect = st.dialect
        if key is not None:
            dialect.require_keyed_tasks()
        if mode == "idempotent":
            merge.require_ledger(st)
        if on_complete is not None:
            complete.check(st, on_complete, flow_name)
        # A batch's tasks are counted by the merge that inserts them, in its transaction.
        direct = on_complete is None and is_direct(mode, dialect.name, key=key,
                                                   run_at=run_at, priority=priority)
        tasks = _task_frame(F, df, queue=queue, payload=payload, run_at=run_at,
                            priority=priority, key=key, max_attempts=max_attempts,
                            group=group, default_max_attempts=config.max_attempts,
                            direct=direct,
                            ids=(id_columns, id_namespace) if mode == "idempotent" else None,
                            trace_context=trace_context)
        tasks = _partitioned(tasks, num_partitions)

        def options(table: str) -> dict[str, str]:
            return writer_options(target, table, dialect=dialect.name, batch_size=batch_size,
                                  extra=jdbc_options)

        def save(table: str) -> None:
            tasks.write.format("jdbc").options(**options(table)).mode("append").save()

        if direct:
            batches = options(TASKS_TABLE)["isolationLevel"] == "NONE"
            with failure.reported(failure.BATCHES if batches else failure.DIRECT):
                save(TASKS_TABLE)
            result = WriteResult(mode, "direct")
        else:
            stage = merge.new_stage_name()
            merge.create_stage(st, stage)
            try:
                with failure.reported(failure.STAGED if on_complete is None
                                      else failure.STAGED_BATCH):
                    save(f"{merge.SCHEMA}.{stage}")
                    merged = merge.merge(st, stage, idempotent=mode == "idempotent",
                                         batch=batch, on_complete=on_complete,
                                         flow_name=flow_name)
            finally:
                merge.drop_stage(st, stage)
            ids = (None, None) if merged.batch is None else (merged.batch.flow_id,
                                                             merged.batch.callback_id)
            result = WriteResult(mode, "staged", merged.staged, merged.tasks, merged.fresh,
                                 *ids)
        if dialect.notify and config.notify and isinstance(queue, str):
            merge.notify(st, queue)
        return result
    finally:
        st.blocking().close()


def is_direct(mode: str, dialect: str, *, key: Any, run_at: Any, priority: Any) -> bool:
    """Whether rows go straight into shardq.tasks: plain rows (no key, run_at or
    priority) in append mode, on PostgreSQL, where a partition is one transaction.
    CockroachDB's writer commits each batch alone, so its rows are staged and merged
    in one transaction."""
    no_priority = priority is None or (isinstance(priority, int) and priority == 0)
    return (mode == "append" and dialect == "postgresql" and key is None and run_at is None
            and no_priority)


def prune_ledger(dsn: str | None = None, *, older_than_s: float = 7 * 86400) -> int:
    """Forget the ids idempotent writes merged more than ``older_than_s`` ago.

    A re-run of a job after its ids were pruned writes its tasks again: keep them at
    least as long as a job may be re-run.  Returns how many ids were forgotten.
    """
    config = load(ClientConfig, {"dsn": dsn})
    if not config.dsn:
        raise ConfigError("name the database: prune_ledger(dsn) or SHARDQ_DSN")
    st = _statements(config, config.dsn)
    try:
        return merge.prune(st, older_than_s)
    finally:
        st.blocking().close()


def _statements(config: ClientConfig, dsn: str) -> Statements:
    """One connection's statements layer: the driver runs a few statements, one at a time."""
    return Statements(Database.for_config(dsn, config, max_size=1), config)


def _addresses(url: str | None, dsn: str | None,
               options: Mapping[str, str] | None) -> tuple[str, Any]:
    """The driver's libpq DSN and the executors' JDBC target.  Without ``dsn`` the driver
    uses ``url``, or else the configured database (``SHARDQ_DSN``)."""
    dsn = dsn or (None if url else load(ClientConfig).dsn)
    if not dsn and not url:
        raise ConfigError("name the database: write_tasks(df, dsn='postgresql://...') or "
                          "SHARDQ_DSN (a TCP address: JDBC cannot use a unix socket)")
    jdbc_from = url or dsn
    assert jdbc_from is not None
    target = jdbc_target(jdbc_from)
    if dsn is None:
        assert url is not None
        dsn = (libpq_url(url, {**target.properties, **(options or {})})
               if url.startswith("jdbc:") else url)
    return dsn, target


def _task_frame(F: Any, df: Any, *, queue: Any, payload: Any, run_at: Any, priority: Any,
                key: Any, max_attempts: Any, group: Any, default_max_attempts: int,
                direct: bool, ids: tuple[Sequence[str] | None, uuid.UUID | None] | None,
                trace_context: Any) -> Any:
    """``df`` as the columns of shardq.tasks (direct) or of a staging table; the group and
    the trace context are columns only when given (both tables take NULL without them)."""
    base = {
        "queue": frame.queue_column(F, df, queue),
        "payload": frame.payload_column(F, df, payload),
        "max_attempts": frame.int_column(F, df, max_attempts, "max_attempts",
                                         default_max_attempts),
    }
    optional = [n for n, v in (("task_group", group), ("trace_context", trace_context))
                if v is not None]
    if group is not None:
        base["task_group"] = frame.group_column(F, group)
    if trace_context is not None:
        base["trace_context"] = frame.column(F, df, trace_context, "trace_context").cast("string")
    if direct:
        return df.select(*[col.alias(name) for name, col in base.items()])
    base["seq"] = F.monotonically_increasing_id()
    base["key"] = (F.lit(None) if key is None
                   else frame.column(F, df, key, "key")).cast("string")
    base["run_at_us"] = (F.lit(None).cast("long") if run_at is None
                         else frame.utc_micros(F, df, run_at, "run_at"))
    base["priority"] = frame.int_column(F, df, priority, "priority", 0)
    names = ["seq", "queue", "key", "payload", "run_at_us", "priority", "max_attempts",
             *optional]
    if ids is None:
        return df.select(*[base[n].alias(n) for n in names])
    id_columns, namespace = ids
    parts = [frame.id_part(F, df, c).alias(f"_id{i}") for i, c in enumerate(id_columns or ())]
    staged = df.select(*[base[n].alias(n) for n in names], *parts)
    if id_columns:
        name_parts = [F.col("queue"), *[F.col(f"_id{i}") for i in range(len(id_columns))]]
    else:  # the whole task
        name_parts = [F.col(n).cast("string") for n in
                      ("queue", "key", "payload", "run_at_us", "priority", "max_attempts")]
    task_id = frame.uuid5_column(F, name_parts, namespace or frame.SPARK_NAMESPACE)
    return staged.select(*names[:1], task_id.alias("id"), *names[1:])


def _partitioned(df: Any, n: int | None) -> Any:
    """``df`` in ``n`` partitions: coalesced when it has more, repartitioned when fewer."""
    if n is None:
        return df
    try:
        current = int(df.rdd.getNumPartitions())
    except Exception:  # Spark Connect has no RDDs: repartition
        return df.repartition(n)
    if n < current:
        return df.coalesce(n)
    return df.repartition(n) if n > current else df
