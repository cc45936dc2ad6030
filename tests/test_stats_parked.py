"""Parked durable tasks in the queue figures: counted apart from the scheduled tasks, by
reason, exactly while few and estimated past the cap of their index read; and the
worker's gauge of them, by queue and reason.  Parked rows are written directly (a
parked task is an available row, not yet due, with what it waits for)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

import shardq
from shardq.ops import parkedstats
from shardq.worker.metrics import Metrics
from shardq.worker.observe import StatsSampler
from tests.conftest import Databases
from tests.helpers import shardq_cli, within_stated_error

pytestmark = [pytest.mark.server, pytest.mark.behaviour]

PARK = """
    INSERT INTO shardq.tasks (queue, payload, exec_time, parked, wait_event, durable)
    SELECT %(queue)s, '{}', now() + %(in_s)s * interval '1 s', %(reason)s,
           CASE WHEN %(reason)s = 'event' THEN 'e-' || g END, true
    FROM generate_series(1, %(n)s) AS g"""


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def parked(conn: psycopg.Connection[Any], queue: str, reason: str, n: int,
           in_s: float = 3600) -> None:
    """``n`` tasks of ``queue`` parked on ``reason``, woken in ``in_s`` seconds."""
    conn.execute(PARK, {"queue": queue, "reason": reason, "n": n, "in_s": in_s})


def test_parked_tasks_are_counted_apart_by_reason(client: shardq.Client,
                                                  connect: psycopg.Connection[Any],
                                                  dsn: str) -> None:
    queue, other = fresh("parked"), fresh("other")
    client.enqueue_many(queue, [{"n": n} for n in range(3)])
    client.enqueue_many(queue, [{"n": n} for n in range(4)], delay_s=600)
    parked(connect, queue, "sleep", 2)
    parked(connect, queue, "event", 5)
    parked(connect, queue, "children", 1)
    parked(connect, queue, "event", 2, in_s=-1)  # woken: due, so available
    parked(connect, other, "sleep", 7)
    stats = client.stats(queue)
    assert {k: stats[k] for k in ("available", "scheduled", "parked", "locked", "dead")} == \
        {"available": 5, "scheduled": 4, "parked": 8, "locked": 0, "dead": 0}
    assert stats["parked_by"] == {"sleep": 2, "event": 5, "children": 1}
    assert {"available", "scheduled", "parked"} <= set(stats["exact"])
    assert stats["error"] == {}
    assert client.queues()[other]["parked_by"] == {"sleep": 7, "event": 0, "children": 0}
    # The command line's table has the column.
    lines = shardq_cli("stats", "--dsn", dsn).stdout.splitlines()
    columns = [c.strip() for c in lines[1].split("┃")]
    [row] = [[c.strip() for c in line.split("│")] for line in lines if f" {queue} " in line]
    assert (row[columns.index("sched")], row[columns.index("parked")]) == ("4", "8")


def test_many_parked_tasks_are_estimated_within_the_stated_error(
        databases: Databases) -> None:
    # One bucket; the sleeps pass the cap of their read, the events stay under it.
    url = databases.create(bucket_count=1)
    sleeps = parkedstats.PARKED_BUDGET + 3000
    with psycopg.connect(url, autocommit=True) as conn:
        parked(conn, "big", "sleep", sleeps)
        parked(conn, "big", "event", 40)
        conn.execute("INSERT INTO shardq.tasks (queue, payload, exec_time) "
                     "SELECT 'big', '{}', now() + interval '1 hour' "
                     "FROM generate_series(1, 2000)")
        conn.execute("VACUUM ANALYZE shardq.tasks")
    with shardq.Client(url) as client:
        stats, second = client.stats("big"), client.stats("big")
    for figures in (stats, second):
        assert "parked" not in figures["exact"]
        assert "scheduled" not in figures["exact"]
        assert figures["parked_by"]["event"] == 40  # under its cap: as counted
        assert figures["parked_by"]["sleep"] >= parkedstats.PARKED_BUDGET  # never below
    assert within_stated_error(sleeps + 40, "parked", stats, second), (stats, second)
    assert within_stated_error(2000, "scheduled", stats, second), (stats, second)
    assert stats["error"]["parked"] < 0.2 * sleeps


def test_the_sampler_gauges_parked_tasks_by_reason(client: shardq.Client,
                                                   connect: psycopg.Connection[Any]) -> None:
    queue = fresh("gauged")
    parked(connect, queue, "sleep", 3)
    parked(connect, queue, "children", 2)
    metrics = Metrics()
    sampler = StatsSampler(client, [queue], metrics)

    def gauge(name: str, **labels: str) -> Any:
        return metrics.registry.get_sample_value(name, {"queue": queue, **labels})

    assert sampler.run_once() == 1
    assert {r: gauge("shardq_queue_parked", reason=r) for r in parkedstats.REASONS} == \
        {"sleep": 3, "event": 0, "children": 2}
    assert gauge("shardq_queue_scheduled") == 0
    connect.execute("DELETE FROM shardq.tasks WHERE queue = %s AND parked = 'sleep'", (queue,))
    sampler.run_once()
    assert gauge("shardq_queue_parked", reason="sleep") == 0
    metrics.forget(queue)  # a failed sample: absent, not stale
    assert gauge("shardq_queue_parked", reason="children") is None
