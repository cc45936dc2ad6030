"""read_tasks with a real local Spark: tasks in every state, dead letters and kept
results read back and compared with the tables, and each partition's statement one
bounded range of the tasks table's primary key (EXPLAIN).  Skipped like
tests/test_spark.py when PySpark, Java or the JDBC jar is missing."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core import sqlfiles
from shardq.core.errors import ConfigError
from shardq.spark import COLUMNS, STATES, read_tasks
from tests.conftest import Databases
from tests.helpers import claim_all, query
from tests.spark_env import require_spark

pytestmark = pytest.mark.server

require_spark()
F = pytest.importorskip("pyspark.sql.functions")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(value: datetime | None) -> int | None:
    return None if value is None else (value - EPOCH) // timedelta(microseconds=1)


@pytest.fixture(scope="module")
def url(dbs: Databases) -> str:
    """Tasks of queue jobs in every state, tasks of another queue, and kept results."""
    url = dbs.create()
    later = datetime.now(UTC) + timedelta(hours=1)
    with shardq.Client(url) as client:
        client.enqueue_many("jobs", [{"n": n} for n in range(60)])
        client.enqueue_many("jobs", [{"n": n} for n in range(60, 70)], run_at=later)
        client.enqueue_many("other", [{"n": n} for n in range(70, 77)])
        claimed = claim_all(client, "jobs", most=20)
        for task in claimed[:6]:
            client.nack(task, "boom: it failed", dead=True)
        client.nack(claimed[6], "once", retry_in_s=3600)  # back in line, scheduled
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.results (id, queue, value, error, attempts, enqueued_at,
                                        finished_at, expires_at)
            VALUES (gen_random_uuid(), 'jobs', '{"answer": 42}', NULL, 1, now(), now(),
                    now() + interval '1 hour'),
                   (gen_random_uuid(), 'jobs', NULL, 'not JSON', 2, now(), now(),
                    now() + interval '1 hour'),
                   (gen_random_uuid(), 'jobs', '1', NULL, 1, now(), now(),
                    now() - interval '1 second')""")
    return url


def table(url: str, queue: str | None) -> dict[str, tuple[Any, ...]]:
    """What the tables hold, in read_tasks's terms, by id."""
    rows = query(url, """
        SELECT id::text, queue, CASE WHEN status = 'available' AND exec_time > now()
                                     THEN 'scheduled' ELSE status END,
               payload, key, priority, attempts, max_attempts, last_error, enqueued_at,
               exec_time, first_claimed_at, last_claimed_at
        FROM shardq.tasks WHERE queue = coalesce(%s, queue)""", (queue,))
    got = {r[0]: (r[1], r[2], r[3], *r[4:9], None, *[micros(t) for t in r[9:13]],
                  micros(r[10]) if r[2] == "dead" else None) for r in rows}
    for r in query(url, """
            SELECT id::text, queue, value, error, attempts, enqueued_at, finished_at
            FROM shardq.results WHERE expires_at > now()
              AND queue = coalesce(%s, queue)""", (queue,)):
        got[r[0]] = (r[1], "succeeded", None, None, None, r[4], None, r[3], r[2], micros(r[5]),
                     None, None, None, micros(r[6]))
    return got


def read(spark: Any, url: str, **options: Any) -> dict[str, tuple[Any, ...]]:
    """read_tasks's rows by id, times as microseconds (no zone on the way)."""
    df = read_tasks(spark, dsn=url, **options)
    assert tuple(df.columns) == COLUMNS
    times = ("enqueued_at", "exec_time", "first_claimed_at", "last_claimed_at", "finished_at")
    rows = df.select(*[F.unix_micros(c).alias(c) if c in times else c for c in COLUMNS]).collect()
    out = {}
    for r in rows:
        payload = None if r.payload is None else json.loads(r.payload)
        result = None if r.result is None else json.loads(r.result)
        out[r.id] = (r.queue, r.state, payload, r.key, r.priority, r.attempts, r.max_attempts,
                     r.last_error, result, *[r[t] for t in times])
    assert len(out) == len(rows)
    return out


def test_every_state_read_back_as_the_tables_hold_it(spark: Any, url: str) -> None:
    expected = table(url, "jobs")
    got = read(spark, url, queue="jobs", states=STATES)
    assert got == expected
    states = sorted(v[1] for v in got.values())
    assert {s: states.count(s) for s in set(states)} == {
        "available": 40, "scheduled": 11, "locked": 13, "dead": 6, "succeeded": 2}
    dead = [v for v in got.values() if v[1] == "dead"]
    assert all(v[7] == "boom: it failed" and v[13] is not None for v in dead)
    assert sorted(str(v[8]) for v in got.values() if v[1] == "succeeded") == [
        "None", "{'answer': 42}"]


def test_states_and_queues_narrow_the_read(spark: Any, url: str) -> None:
    everything = table(url, None)
    default = read(spark, url)  # every queue, every state but succeeded
    assert default == {k: v for k, v in everything.items() if v[1] != "succeeded"}
    assert {v[0] for v in default.values()} == {"jobs", "other"}
    for states in (["dead"], ["available"], ["scheduled"], ["locked", "succeeded"]):
        got = read(spark, url, queue="jobs", states=states, num_partitions=4)
        assert got == {k: v for k, v in everything.items()
                       if v[0] == "jobs" and v[1] in states}, states
        assert got


def test_partitions_follow_the_buckets(spark: Any, url: str) -> None:
    cores = spark.sparkContext.defaultParallelism
    assert read_tasks(spark, dsn=url, states=["dead"]).rdd.getNumPartitions() == min(16, cores)
    assert read_tasks(spark, dsn=url, num_partitions=16).rdd.getNumPartitions() == 16
    assert read_tasks(spark, dsn=url, num_partitions=5).rdd.getNumPartitions() == 5
    with_results = read_tasks(spark, dsn=url, states=["dead", "succeeded"], num_partitions=4)
    assert with_results.rdd.getNumPartitions() == 5  # and one for the results
    with pytest.raises(ConfigError, match="num_partitions"):
        read_tasks(spark, dsn=url, num_partitions=17)
    with pytest.raises(ConfigError, match="states"):
        read_tasks(spark, dsn=url, states=["done"])
    with pytest.raises(shardq.InvalidTask):
        read_tasks(spark, dsn=url, queue="no queue")


def jdbc_partitions(df: Any) -> list[str]:
    """The WHERE clause Spark gives each partition of ``df``'s JDBC scan."""
    rdd = df._jdf.queryExecution().toRdd()  # noqa: SLF001 (the JVM's plan)
    while "JDBCRDD" not in rdd.getClass().getName():
        rdd = rdd.dependencies().head().rdd()
    return [p.whereClause() for p in rdd.partitions()]


def test_each_partition_reads_one_bounded_index_range(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, status, exec_time)
            SELECT CASE WHEN g % 4 = 0 THEN 'jobs' ELSE 'other' END, '{}',
                   CASE WHEN g % 10 = 0 THEN 'dead' ELSE 'available' END, now()
            FROM generate_series(1, 50000) AS g""")
        conn.execute("ANALYZE shardq.tasks")
    df = read_tasks(spark, dsn=url, queue="jobs", states=["dead"], num_partitions=16)
    spark.conf.set("spark.sql.maxMetadataStringLength", "100000")  # the whole plan
    try:
        plan = df._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
    finally:
        spark.conf.unset("spark.sql.maxMetadataStringLength")
    pushed = re.search(r"PushedFilters: \[(.*?)\], ", plan)
    assert pushed is not None, plan
    assert "*EqualTo(queue,jobs)" in pushed[1], pushed[1]
    assert "*EqualTo(status,dead)" in pushed[1], pushed[1]
    clauses = jdbc_partitions(df)
    assert len(clauses) == 16
    subquery = sqlfiles.query("spark/read_tasks", "postgresql", "bucket").as_string(None)
    with psycopg.connect(url, autocommit=True) as conn:
        for clause in clauses:
            # As Spark sends it: the pushed filters, then the partition's range.
            text = ("EXPLAIN SELECT * FROM " + subquery + " WHERE (\"queue\" IS NOT NULL) "
                    "AND (\"status\" IS NOT NULL) AND (\"queue\" = 'jobs') "
                    "AND (\"status\" = 'dead') AND (" + clause + ")")
            lines = [r[0] for r in conn.execute(text)]
            explained = "\n".join(lines)
            assert "Seq Scan" not in explained, explained
            assert re.search(r"Index Cond: \(\(bucket [<>=]", explained), explained
            assert "tasks_pkey" in explained, explained
    assert df.count() == query(url, "SELECT count(*) FROM shardq.tasks "
                                    "WHERE queue = 'jobs' AND status = 'dead'")[0][0]
