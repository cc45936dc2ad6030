"""shardq.spark against a real local Spark (local[2,2]) and a real PostgreSQL on TCP.

The JVM runs in America/New_York and Spark's session in Asia/Kolkata, so any time that
went through a zone on its way would come out shifted.  Skipped, with the reason, when
PySpark, Java or the PostgreSQL JDBC jar is missing (CI installs all three).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core import migrate
from shardq.core.config import ClientConfig
from shardq.loops.resolver import resolve
from shardq.ops.batches import OPEN_WAITS
from shardq.spark import prune_ledger, task_id, write_tasks
from shardq.spark.jdbc import jdbc_target
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.conftest import Databases
from tests.helpers import bucket_of, claim_all, query, scalar, wait_for
from tests.spark_env import require_spark

require_spark()

from pyspark.sql import functions as F  # noqa: E402

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parent.parent
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# 2024-11-03 05:00Z is 01:00 EDT: two hours from there cross New York's repeated hour.
BASE_US = 1_730_610_000_000_000
STEP_US = 72_000
TEXT = 'naïve "quoted" \\ back/slash ☃ 𝄞 '


def at(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def iso(micros: int) -> str:
    return at(micros).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def bulk_frame(spark: Any, n: int) -> Any:
    """n rows: times across the repeated hour, priorities -3..3, every tenth row keyed
    (1,000 keys), texts that need escaping, nulls."""
    i = F.col("id")
    return spark.range(n).select(
        i.alias("n"),
        F.concat(F.lit(TEXT), i.cast("string")).alias("text"),
        F.timestamp_micros(F.lit(BASE_US) + i * STEP_US + i % 997).alias("ts"),
        F.when(i % 3 == 0, F.lit(None)).otherwise(F.lit("x")).alias("note"),
        (i % 7 - 3).cast("int").alias("priority"),
        F.when(i % 10 == 0, F.concat(F.lit("acct-"), ((i / 10) % 1000).cast("long")
                                     .cast("string"))).alias("key"),
        (i % 4 + 1).cast("int").alias("max_attempts"),
    )


def test_100k_tasks_row_by_row_then_the_daemon_consumes_them(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    n = 110_000  # 99,000 unkeyed rows + 11,000 keyed rows coalescing into 1,000 tasks
    result = write_tasks(bulk_frame(spark, n), dsn=url, queue="bulk",
                         payload=["n", "text", "ts", "note"], run_at="ts", priority="priority",
                         key="key", max_attempts="max_attempts")
    assert (result.path, result.staged, result.tasks) == ("staged", n, 100_000)

    rows = query(url, "SELECT id, bucket, key, payload, exec_time, pending_head_start_s, "
                      "priority, max_attempts, status FROM shardq.tasks WHERE queue = 'bulk'")
    # The last row of each key wins: n = 10 * (k + 1000 * 10) for key k.
    expected = {i for i in range(n) if i % 10} | {10 * (k + 10_000) for k in range(1000)}
    assert len(rows) == len(expected) == 100_000
    seen = set()
    for task, bucket, key, payload, exec_time, pending, priority, attempts, status in rows:
        i = payload["n"]
        seen.add(i)
        micros = BASE_US + i * STEP_US + i % 997
        assert bucket == bucket_of(task)
        assert payload == {"n": i, "text": f"{TEXT}{i}", "ts": iso(micros),
                           "note": None if i % 3 == 0 else "x"}
        assert exec_time == at(micros) - timedelta(seconds=i % 7 - 3)  # due in the past
        assert (pending, priority, attempts, status) == (0, i % 7 - 3, i % 4 + 1, "available")
        assert key == (f"acct-{(i // 10) % 1000}" if i % 10 == 0 else None)
    assert seen == expected

    env = {**os.environ, "SHARDQ_DSN": url, "PYTHONPATH": str(ROOT)}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "shardq", "consume", "examples.spark_handlers:handle",
         "--queue", "bulk", "--concurrency", "16", "--batch", "500", "--ack-batch", "500"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: scalar(url, "SELECT count(*) FROM shardq.tasks") == 0, 150,
                 interval=0.2, what="the daemon to consume every task")
        daemon.send_signal(signal.SIGTERM)
        out, _ = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate()
    assert daemon.returncode == 0, out


def test_plain_rows_go_straight_into_the_table(spark: Any, dbs: Databases) -> None:
    url = dbs.create(bucket_count=64)
    frame = spark.range(20_000).select(
        F.to_json(F.struct(F.col("id").alias("n"), F.lit(TEXT).alias("text"))).alias("json"))
    result = write_tasks(frame, dsn=url, queue="plain", payload="json", num_partitions=3)
    assert result.path == "direct"
    assert result.tasks is None
    rows = query(url, "SELECT id, bucket, payload, max_attempts, priority, exec_time = enqueued_at "
                      "FROM shardq.tasks")
    assert sorted(r[2]["n"] for r in rows) == list(range(20_000))
    for task, bucket, payload, attempts, priority, in_line_now in rows:
        assert bucket == bucket_of(task, 64)
        assert payload["text"] == TEXT
        assert (attempts, priority, in_line_now) == (10, 0, True)
    assert len({r[1] for r in rows}) == 64


def test_a_plain_jdbc_write_of_the_documented_columns(spark: Any, dbs: Databases) -> None:
    """What the README promises for df.write.jdbc without shardq: the database fills the
    rest, the bucket included, and TimestampType values keep their instant."""
    url = dbs.create()
    micros = [BASE_US + k * 900_000_000 + k for k in range(12)]  # 01:00 EDT .. 03:45 EST
    ids = [uuid.uuid4() for _ in micros]
    frame = spark.createDataFrame(
        [(str(t), "plain", json.dumps({"k": k}), k + 1) for k, t in enumerate(ids)],
        "id string, queue string, payload string, max_attempts int",
    ).withColumn("exec_time", F.timestamp_micros(
        F.element_at(F.array(*[F.lit(m) for m in micros]), F.col("max_attempts"))))
    target = jdbc_target(url)
    frame.write.jdbc(target.jdbc_url, "shardq.tasks", mode="append", properties={
        **target.properties, "driver": "org.postgresql.Driver", "stringtype": "unspecified"})
    rows = query(url, "SELECT id, bucket, payload, exec_time, max_attempts FROM shardq.tasks")
    assert len(rows) == 12
    for task, bucket, payload, exec_time, attempts in rows:
        k = payload["k"]
        assert (task, bucket, exec_time, attempts) == (ids[k], bucket_of(ids[k]), at(micros[k]),
                                                       k + 1)
    assert len(finish_all(url, "plain")) == 12


def finish_all(url: str, queue: str) -> list[shardq.Task]:
    """Claim and ack every eligible task of ``queue``, a thousand at a time."""
    done: list[shardq.Task] = []
    with shardq.Client(url) as client:
        while tasks := claim_all(client, queue, most=1000):
            client.ack_many(tasks)
            done += tasks
    return done


def test_future_times_priorities_and_zoneless_times(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    soon = datetime.now(UTC).replace(microsecond=123_456) + timedelta(hours=1)
    frame = spark.createDataFrame(
        [(1, soon, 300), (2, soon, -30), (3, soon, 0)], "n long, run_at timestamp, p int"
    )
    write_tasks(frame, dsn=url, queue="later", payload=["n"], run_at="run_at", priority="p")
    got = {p["n"]: (t, s) for p, t, s in query(
        url, "SELECT payload, exec_time, pending_head_start_s FROM shardq.tasks")}
    assert got == {1: (soon, 300), 2: (soon + timedelta(seconds=30), 0), 3: (soon, 0)}

    # A TimestampNTZ column has no zone: it is read as UTC, not in the JVM's or session's.
    naive = soon.replace(tzinfo=None)
    ntz = spark.createDataFrame([(4, naive)], "n long, run_at timestamp_ntz")
    write_tasks(ntz, dsn=url, queue="later", payload=["n"], run_at="run_at")
    assert query(url, "SELECT exec_time FROM shardq.tasks WHERE payload->>'n' = '4'") == [(soon,)]


def test_groups_by_column_or_one_for_every_row(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    frame = spark.createDataFrame([("t1", 1), ("t2", 2), (None, 3)], "tenant string, n int")
    direct = write_tasks(frame, dsn=url, queue="fair", payload=["n"], group=F.col("tenant"))
    staged = write_tasks(frame, dsn=url, queue="fair", payload=["n"], group="batch",
                         mode="idempotent")
    assert (direct.path, staged.path) == ("direct", "staged")
    got = sorted((r[0]["n"], r[1] or "") for r in query(
        url, "SELECT payload, task_group FROM shardq.tasks"))
    assert got == [(1, "batch"), (1, "t1"), (2, "batch"), (2, "t2"), (3, ""), (3, "batch")]
    with pytest.raises(shardq.InvalidTask):
        write_tasks(frame, dsn=url, queue="fair", payload=["n"], group="")


def test_a_trace_context_column_travels_with_the_tasks(spark: Any, dbs: Databases) -> None:
    """Straight into the table and through the staging table (keyed rows), each row's
    traceparent is stored with its task, and a claim hands it to the worker."""
    url = dbs.create()
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    frame = spark.range(6).select(F.to_json(F.struct(F.col("id").alias("n"))).alias("json"),
                                  (F.col("id") % 2).cast("string").alias("k"))
    direct = write_tasks(frame, dsn=url, queue="traced", payload="json",
                         trace_context=F.lit(parent))
    assert direct.path == "direct"
    staged = write_tasks(frame, dsn=url, queue="keyed", payload="json", key="k",
                         trace_context=F.concat(F.lit(parent[:-2]), F.lit("0"), F.col("k")))
    assert staged.path == "staged"
    plain = write_tasks(frame, dsn=url, queue="untraced", payload="json", key="k")
    assert plain.path == "staged"
    assert sorted(query(url, "SELECT queue, key, trace_context FROM shardq.tasks "
                             "WHERE queue <> 'traced'")) == [
        ("keyed", "0", parent[:-2] + "00"), ("keyed", "1", parent),
        ("untraced", "0", None), ("untraced", "1", None)]
    assert {t.trace_context for t in finish_all(url, "traced")} == {parent}


def test_keys_coalesce_with_waiting_tasks(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    early = datetime.now(UTC) - timedelta(hours=1)
    with shardq.Client(url) as client:
        waiting = client.enqueue("keyed", {"v": "old"}, key="a", run_at=early)
    frame = spark.createDataFrame([("a", "new-1"), ("b", "b-1"), ("a", "new-2")],
                                  "k string, v string")
    result = write_tasks(frame, dsn=url, queue="keyed", payload=["v"], key="k")
    assert result.tasks == 2
    got = {k: (i, p, t) for i, k, p, t in query(
        url, "SELECT id, key, payload, exec_time FROM shardq.tasks")}
    assert got["a"] == (waiting, {"v": "new-2"}, early)  # latest payload, earlier place
    assert got["b"][1] == {"v": "b-1"}


def test_idempotent_writes_insert_nothing_twice(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    n = 20_000
    frame = spark.range(n).select(F.col("id").alias("n"),
                                  F.concat(F.lit(TEXT), F.col("id")).alias("text"))

    def write() -> Any:
        return write_tasks(frame, dsn=url, queue="idem", payload=["n", "text"],
                           mode="idempotent", id_columns=["n"])

    first = write()
    assert (first.staged, first.fresh, first.tasks) == (n, n, n)
    again = write()
    assert (again.staged, again.fresh, again.tasks) == (n, 0, 0)
    rows = query(url, "SELECT id, bucket, payload FROM shardq.tasks")
    assert len(rows) == n
    for task, bucket, payload in rows:
        assert task == task_id("idem", str(payload["n"]))
        assert task.version == 5
        assert bucket == bucket_of(task)
    per_bucket = [c for (c,) in query(url, "SELECT count(*) FROM shardq.tasks GROUP BY bucket")]
    assert len(per_bucket) == 16
    assert min(per_bucket) > 0.8 * n / 16

    assert len(finish_all(url, "idem")) == n  # done and deleted: a re-run still adds nothing
    assert write().tasks == 0
    assert query(url, "SELECT count(*) FROM shardq.tasks") == [(0,)]
    assert prune_ledger(url, older_than_s=0) == n
    assert write().tasks == n  # forgotten ids are new again


def test_idempotent_ids_default_to_the_whole_task(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    frame = spark.createDataFrame([(k % 3, f"t{k % 3}") for k in range(9)], "n long, t string")
    for _ in range(2):
        write_tasks(frame, dsn=url, queue="whole", payload=["n", "t"], mode="idempotent")
    assert sorted(p["n"] for (p,) in query(url, "SELECT payload FROM shardq.tasks")) == [0, 1, 2]


FAIL_AT = 6_000  # a row of partition 0 (rows 0..9,999), after several committed batches


@pytest.mark.parametrize("mode", ["append", "idempotent"])
def test_a_retried_spark_task(spark: Any, dbs: Databases, mode: str) -> None:
    """Partition 0 fails mid-write on its first attempt, after some batches committed
    (isolationLevel NONE: each batch commits alone, as on CockroachDB); Spark runs it
    again.  Append mode then holds those rows twice; idempotent mode holds each once."""
    from pyspark import TaskContext

    def failing_payload(i: int) -> str:  # local: Spark pickles it by value for its workers
        context = TaskContext.get()
        assert context is not None  # a UDF runs inside a Spark task
        if context.partitionId() == 0 and context.attemptNumber() == 0 and i == FAIL_AT:
            raise RuntimeError("injected failure in the first attempt of partition 0")
        return json.dumps({"n": i})

    url = dbs.create()
    n = 20_000
    payload = F.udf(failing_payload, "string", useArrow=False)
    frame = spark.range(0, n, 1, 2).select(F.col("id").alias("n"),
                                           payload(F.col("id")).alias("json"))
    result = write_tasks(frame, dsn=url, queue="retried", payload="json", mode=mode,
                         id_columns=["n"] if mode == "idempotent" else None, batch_size=500,
                         jdbc_options={"isolationLevel": "NONE"})
    counts = query(url, "SELECT count(*), count(DISTINCT payload) FROM shardq.tasks")[0]
    if mode == "append":
        assert counts[1] == n
        assert counts[0] > n  # the retry wrote some rows again
    else:
        assert result.staged is not None
        assert result.staged > n  # ... into the staging table
        assert counts == (n, n)
        assert result.tasks == result.fresh == n


def test_spark_ids_are_the_documented_uuid5(spark: Any) -> None:
    from shardq.spark import frame as spark_frame

    values = ["plain", TEXT, "", "quote\"slash\\", "日本語", None]
    df = spark.createDataFrame([(v,) for v in values], "v string")
    ids = df.select(spark_frame.uuid5_column(F, [F.lit("q"), F.col("v")],
                                             spark_frame.SPARK_NAMESPACE).alias("id")).collect()
    assert [uuid.UUID(r.id) for r in ids] == [task_id("q", v) for v in values]
    assert all(uuid.UUID(r.id).variant == uuid.RFC_4122 and str(uuid.UUID(r.id)) == r.id
               for r in ids)


def test_empty_frames_and_refusals(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    empty = spark.createDataFrame([], "n long, ts timestamp, s string")
    assert write_tasks(empty, dsn=url, queue="e", payload=["n"]).path == "direct"
    assert write_tasks(empty, dsn=url, queue="e", payload=["n"], run_at="ts").tasks == 0
    assert query(url, "SELECT count(*) FROM shardq.tasks") == [(0,)]
    with pytest.raises(shardq.ConfigError, match="timestamp column"):
        write_tasks(empty, dsn=url, queue="e", payload=["n"], run_at="s")
    with pytest.raises(shardq.ConfigError, match="JSON string column"):
        write_tasks(empty, dsn=url, queue="e", payload="n")
    with pytest.raises(shardq.ConfigError, match="no column 'nope'"):
        write_tasks(empty, dsn=url, queue="e", payload=["nope"])
    with pytest.raises(shardq.InvalidTask, match="queue"):
        write_tasks(empty, dsn=url, queue="bad queue", payload=["n"])
    # Column types are checked before Spark runs anything.
    typed: list[tuple[dict[str, Any], str]] = [
        ({"priority": "s"}, "priority: must be an integer column, not string"),
        ({"max_attempts": "ts"}, "max_attempts: must be an integer column, not timestamp"),
        ({"queue": F.col("n")}, "queue: must be a string column, not long"),
    ]
    for arguments, message in typed:
        options: dict[str, Any] = {"queue": "e", "payload": ["n"], **arguments}
        with pytest.raises(shardq.ConfigError) as refused:
            write_tasks(empty, dsn=url, **options)
        assert str(refused.value) == message
    with pytest.raises(shardq.ConfigError, match="id_columns"):
        write_tasks(empty, dsn=url, queue="e", payload=["n"], id_columns=["n"])
    old = dbs.create(migrated=False)
    migrate.upgrade(old, revision="0007", output=io.StringIO())
    with pytest.raises(shardq.SchemaNotReady, match="spark_ledger"):
        write_tasks(empty, dsn=old, queue="e", payload=["n"], mode="idempotent")


def test_a_bad_row_writes_nothing_of_its_partition(spark: Any, dbs: Databases) -> None:
    """Rows 0-4 and 5-9 are two partitions; row 7's payload is null.  Batches of two
    rows: rows 5 and 6 reach the table before row 7's batch is refused, and go with the
    partition's transaction.  The error is one line naming the column and its rule."""
    url = dbs.create()
    n = F.col("id")
    frame = spark.range(0, 10, 1, 2).select(
        n.alias("n"), F.when(n == 7, F.lit(None)).otherwise(F.to_json(F.struct(n))).alias("json"))
    with pytest.raises(shardq.SparkWriteError) as caught:
        write_tasks(frame, dsn=url, queue="half", payload="json", batch_size=2)
    assert str(caught.value) == ("payload: must not be null (the failing partition wrote "
                                 "nothing; other partitions may have committed theirs)")
    assert (caught.value.column, caught.value.rule) == ("payload", "must not be null")
    assert "violates not-null constraint" in str(caught.value.__cause__)  # Spark's, kept
    written = sorted(p["id"] for (p,) in query(url, "SELECT payload FROM shardq.tasks"))
    assert written in ([], [0, 1, 2, 3, 4])  # partition 0 commits whole or not at all

    # Without transactions each batch commits alone: rows 5 and 6 stay (once per try).
    other = dbs.create()
    with pytest.raises(shardq.SparkWriteError) as caught:
        write_tasks(frame, dsn=other, queue="half", payload="json", batch_size=2,
                    jdbc_options={"isolationLevel": "NONE"})
    assert str(caught.value) == ("payload: must not be null (batches of the failing partition "
                                 "and other partitions may have committed)")
    assert {5, 6} <= {p["id"] for (p,) in query(other, "SELECT payload FROM shardq.tasks")}


def refused_rows() -> list[tuple[dict[str, Any], str]]:
    """Arguments under which one row of two (one partition) is refused, and the message."""
    return [
        ({"queue": F.when(F.col("n") == 1, F.lit("q"))}, "queue: must not be null"),
        ({"max_attempts": F.col("n") - 1}, "max_attempts: must be between 1 and 2147483647"),
        ({"priority": F.col("n") * 2**40},
         "priority: must be between -2147483647 and 2147483647"),
        ({"key": F.repeat(F.lit("k"), 600)}, "key: must be 1 to 512 characters"),
    ]


def test_refused_rows_are_one_line_errors(spark: Any, dbs: Databases) -> None:
    """Each error names the argument and its rule, and says what was written: nothing
    of a partition refused on its way into shardq.tasks, nothing at all when staged.
    Refused by the table's NOT NULL and CHECK constraints, by the merge's, and by Spark
    (a long priority beyond int's range); the texts of others are read in
    tests/test_spark_offline.py."""
    url = dbs.create()
    frame = spark.range(2).select(F.col("id").alias("n"))
    for arguments, message in refused_rows():
        options = {"queue": "q", "payload": F.to_json(F.struct("n")), **arguments}
        staged = "key" in arguments or "priority" in arguments
        written = ("nothing was written" if staged else
                   "the failing partition wrote nothing; other partitions may have "
                   "committed theirs")
        with pytest.raises(shardq.SparkWriteError) as caught:
            write_tasks(frame, dsn=url, num_partitions=1, **options)
        assert str(caught.value) == f"{message} ({written})"
        assert caught.value.__cause__ is not None
        assert query(url, "SELECT count(*) FROM shardq.tasks") == [(0,)], message


# A pipeline's two stages: each row's task, then the callback of the batch they form.
stages = shardq.App()


@stages.task(queue="rows")
def row_task(n: int) -> None:
    """Refuse every thousandth row for good (it dies), do nothing with the others."""
    if n % 1000 == 999:
        raise shardq.Fail(f"row {n} refused")


@stages.task(queue="next_stage")
def next_stage(counts: dict[str, Any], dsn: str) -> dict[str, Any]:
    """Record this run, and how many tasks of the batch have not ended (dead ones have)."""
    me = shardq.current().task.id
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO callback_runs VALUES (%s)", (me,))
        [(left,)] = conn.execute(
            "SELECT count(*) FROM shardq.tasks WHERE flow_id = %s AND id <> %s "
            "AND status <> 'dead'", (counts["flow"], me)).fetchall()
    return {"counts": counts, "left": left}


def row_tasks(spark: Any, n: int) -> Any:
    """n rows whose payloads call row_task (three partitions)."""
    return spark.range(0, n, 1, 3).select(F.to_json(F.struct(
        F.lit(row_task.name).alias("task"), F.array(F.col("id")).alias("args"))).alias("json"))


def test_on_complete_runs_once_after_the_last_task(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE callback_runs (task_id uuid NOT NULL)")
    n = 3000
    result = write_tasks(row_tasks(spark, n), dsn=url, queue="rows", payload="json",
                         on_complete=next_stage.s(url))
    assert (result.path, result.staged, result.tasks) == ("staged", n, n)
    assert result.flow_id is not None
    assert result.callback_id is not None
    assert query(url, "SELECT count(*) FROM shardq.tasks WHERE flow_id = %s "
                      "AND flow_next = ARRAY[%s::uuid]", (result.flow_id, result.callback_id)
                 ) == [(n,)]
    with shardq.Client(url) as client:
        flow = client.flow(result.flow_id, limit=0)
        assert flow is not None
        assert (flow.kind, flow.tasks, flow.result_id) == ("batch", n + 1, result.callback_id)
        worker = Worker(stages, ClientConfig(dsn=url),
                        WorkerConfig(janitors=1, listen=False, concurrency=8))
        worker.start()
        try:
            done = client.result(result.callback_id, wait_s=120)
        finally:
            worker.stop(10)
        assert done.status == "succeeded", done
        assert done.value == {"counts": {"flow": str(result.flow_id), "succeeded": n - 3,
                                         "dead": 3, "cancelled": 0}, "left": 0}
        assert query(url, "SELECT task_id FROM callback_runs") == [(result.callback_id,)]
        flow = client.flow(result.flow_id, limit=0)
        assert flow is not None
        # Three rows died: the flow has failed, its dead letters left to retry or drop.
        assert flow.state == "failed"
        assert {k: v for k, v in flow.counts.items() if v} == {"succeeded": n - 3 + 1, "dead": 3}


def test_a_failed_write_leaves_no_callback(spark: Any, dbs: Databases) -> None:
    """Refused while Spark stages the rows (a null payload) or by the merge (max_attempts
    0, which the staging table takes): the merge's transaction writes the callback, so
    neither leaves a task or a flow, and the error says on_complete will not run."""
    url = dbs.create()
    frame = spark.range(0, 10, 1, 2).select(F.col("id").alias("n"))
    payload = F.to_json(F.struct("n"))
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"payload": F.when(F.col("n") == 7, F.lit(None)).otherwise(payload)},
         "payload: must not be null"),
        ({"payload": payload, "max_attempts": F.col("n") - 1},
         "max_attempts: must be between 1 and 2147483647"),
    ]
    for arguments, rule in refusals:
        with pytest.raises(shardq.SparkWriteError) as caught:
            write_tasks(frame, dsn=url, queue="rows", on_complete=next_stage.s(url),
                        **arguments)
        assert str(caught.value) == f"{rule} (nothing was written, and on_complete will not run)"
        assert query(url, "SELECT count(*) FROM shardq.tasks") == [(0,)]
        assert query(url, "SELECT count(*) FROM shardq.flows") == [(0,)]
    # The callback's arguments are checked before Spark runs anything.
    with pytest.raises(shardq.InvalidTask, match=r"^on_complete \(.*next_stage\.s\(\)\)"):
        write_tasks(frame, dsn=url, queue="rows", payload=["n"], on_complete=next_stage.s())


def test_on_complete_counts_the_tasks_its_merge_inserted(spark: Any, dbs: Databases) -> None:
    """Idempotent writes: a re-run inserts no task and writes no second callback, a
    later run counts only the rows new to the ledger, and a write of no rows has its
    callback released at once with zero counts (as enqueue_many's of no payloads)."""
    url = dbs.create()

    def write(rows: int) -> Any:
        return write_tasks(spark.range(rows).select(F.col("id").alias("n")), dsn=url,
                           queue="rows", payload=["n"], mode="idempotent", id_columns=["n"],
                           on_complete=next_stage.s(url))

    first, again, more, empty = write(100), write(100), write(150), write(0)
    assert (first.tasks, again.tasks, more.tasks, empty.tasks) == (100, 0, 50, 0)
    assert again.flow_id is None
    assert again.callback_id is None
    assert sorted(query(url, "SELECT nodes FROM shardq.flows")) == [(1,), (51,), (101,)]
    callbacks = [first.callback_id, more.callback_id, empty.callback_id]
    waits = "SELECT id, status, waits FROM shardq.tasks WHERE id = ANY(%s)"
    assert sorted(query(url, waits, (callbacks,)), key=lambda r: callbacks.index(r[0])) == [
        (first.callback_id, "waiting", OPEN_WAITS), (more.callback_id, "waiting", OPEN_WAITS),
        (empty.callback_id, "waiting", OPEN_WAITS)]
    with shardq.Client(url) as client:
        resolve(client.statements)  # the seals: each callback waits for its own tasks
    assert sorted(query(url, waits, (callbacks,)), key=lambda r: callbacks.index(r[0])) == [
        (first.callback_id, "waiting", 100), (more.callback_id, "waiting", 50),
        (empty.callback_id, "available", 0)]
    [(payload,)] = query(url, "SELECT payload FROM shardq.tasks WHERE id = %s",
                         (empty.callback_id,))
    assert payload["args"] == [{"flow": str(empty.flow_id), "succeeded": 0, "dead": 0,
                                "cancelled": 0}, url]
