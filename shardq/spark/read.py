"""``read_tasks``: tasks, dead letters and kept results as a Spark DataFrame.

The read goes through Spark's JDBC reader, split on the bucket column: each partition
reads one range of buckets, which is one bounded range of the tasks table's primary
key (bucket, queue, status, exec_time, id) once the queue and status filters are
pushed down with it.  Statements live in ``sql/spark/read_*.sql``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shardq.core import validate
from shardq.core.config import ClientConfig, load
from shardq.core.errors import ConfigError
from shardq.spark import frame
from shardq.spark.jdbc import reader_options
from shardq.spark.write import _addresses, _statements

# Every state a task can be read in, and the status of shardq.tasks each comes from
# (a succeeded task's row has left shardq.tasks: it is read from shardq.results).
STATE_STATUS = {"available": "available", "scheduled": "available", "locked": "locked",
                "dead": "dead"}
STATES = (*STATE_STATUS, "succeeded")
DEFAULT_STATES = ("available", "scheduled", "locked", "dead")
# The public columns of read_tasks's DataFrame, in order.
COLUMNS = ("id", "queue", "state", "payload", "key", "priority", "attempts", "max_attempts",
           "last_error", "result", "enqueued_at", "exec_time", "first_claimed_at",
           "last_claimed_at", "finished_at")


def read_tasks(spark: Any, *, dsn: str | None = None, url: str | None = None,
               queue: str | None = None, states: Iterable[str] = DEFAULT_STATES,
               num_partitions: int | None = None,
               jdbc_options: Mapping[str, str] | None = None) -> Any:
    """A DataFrame of the tasks of ``queue`` (all queues when None) in ``states``.

    States: ``available`` (due), ``scheduled`` (waiting for its run_at or backoff),
    ``locked`` (claimed, running), ``dead`` (out of attempts, cancelled or failed:
    the dead letters) and ``succeeded`` (done with a kept result, read from
    ``shardq.results`` until the result expires; tasks without ``keep_result_s``
    leave no row when they succeed).

    The columns, a public interface (new ones are only ever added at the end):

    - ``id`` (string, the task's uuid), ``queue`` (string), ``state`` (string, above)
    - ``payload`` (string, the JSON text; null for succeeded), ``key`` (string)
    - ``priority``, ``attempts``, ``max_attempts`` (int; priority and max_attempts are
      null for succeeded)
    - ``last_error`` (string: the last failure, the reason of a dead task, or why a
      succeeded task's return value was not kept)
    - ``result`` (string: the JSON a succeeded task's handler returned)
    - ``enqueued_at``, ``exec_time`` (when a waiting task is due, a running task's
      lease runs out, a dead task died), ``first_claimed_at``, ``last_claimed_at``,
      ``finished_at`` (when a task died or succeeded): timestamps (instants)

    ``state`` is evaluated as each partition is read.  Tasks are read in
    ``num_partitions`` bucket ranges (default: as many as Spark runs at once, the
    default parallelism, up to one per bucket), each a bounded index range; succeeded
    tasks in one more partition.  ``dsn``/``url`` are as in
    :func:`shardq.spark.write_tasks`; ``jdbc_options`` override any reader option.
    """
    F = frame.functions()
    wanted = _states(states)
    if queue is not None:
        validate.queue_name(queue)
    config = load(ClientConfig, {"dsn": dsn})
    driver_dsn, target = _addresses(url, dsn, jdbc_options)
    st = _statements(config, driver_dsn)
    try:
        buckets = st.bucket_count
        tasks_sql = st.query("spark/read_tasks").decode()
        results_sql = st.query("spark/read_results").decode()
    finally:
        st.blocking().close()
    parts = []
    in_table = [s for s in wanted if s in STATE_STATUS]
    if in_table:
        options = reader_options(target, tasks_sql, bucket_count=buckets,
                                 num_partitions=num_partitions or _cores(spark, buckets),
                                 extra=jdbc_options)
        tasks = _filtered(F, spark.read.format("jdbc").options(**options).load(), queue)
        statuses = sorted({STATE_STATUS[s] for s in in_table})
        tasks = tasks.where(F.col("status").isin(statuses))
        if set(in_table) != {s for s, status in STATE_STATUS.items() if status in statuses}:
            tasks = tasks.where(F.col("state").isin(in_table))  # available or scheduled only
        parts.append(tasks.select(*COLUMNS))
    if "succeeded" in wanted:
        options = reader_options(target, results_sql, extra=jdbc_options)
        results = _filtered(F, spark.read.format("jdbc").options(**options).load(), queue)
        parts.append(results.select(*COLUMNS))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _cores(spark: Any, buckets: int) -> int:
    """Partitions for a read: as many as Spark runs at once, at most one per bucket.

    A bucket's tasks lie on pages all over the table (ids are random), so every
    partition reads pages the others read too: more partitions than cores cost more
    than they bring.
    """
    try:
        parallel = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext: one partition per bucket
        return buckets
    return max(1, min(buckets, parallel))


def _states(states: Iterable[str]) -> list[str]:
    """The requested states, checked: at least one, each a known state."""
    wanted = [states] if isinstance(states, str) else list(dict.fromkeys(states))
    unknown = [s for s in wanted if s not in STATES]
    if unknown or not wanted:
        raise ConfigError(f"states: choose among {', '.join(STATES)}, got {wanted!r}")
    return wanted


def _filtered(F: Any, df: Any, queue: str | None) -> Any:
    """``df`` of one queue (a filter Spark pushes down into the statement), or all."""
    return df if queue is None else df.where(F.col("queue") == F.lit(queue))
