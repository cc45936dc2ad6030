"""Queue figures at scale and in real time: ``stats()`` on 2M waiting tasks reads a bounded
number of index entries (the same bound as at 10k) with every figure within its stated
error, and the drain forecast of a queue worked through at a steady rate comes true."""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any

import psycopg
import pytest

import shardq
from bench.stats_cost import insert_range, truth
from shardq.core import sqlfiles
from shardq.ops import queuestats, samples
from tests.conftest import Databases
from tests.helpers import in_threads, scalar, wait_for, within_stated_error

pytestmark = pytest.mark.server

WAITING = 2_000_000


def build(url: str, rows: int, parts: int = 2) -> None:
    """``rows`` tasks of queue 'bulk', written server-side by ``parts`` statements at once:
    0.5 % locked, 0.5 % dead, 2 % scheduled, the rest due; then VACUUM ANALYZE, as
    autovacuum would have done."""
    step = -(-rows // parts)
    errors = in_threads(*[partial(insert_range, url, start, min(rows, start + step - 1))
                          for start in range(1, rows + 1, step)])
    assert errors == []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE shardq.tasks")


def entries_read(url: str, name: str, limit: int, params: dict[str, Any]) -> int:
    """Index entries (rows of every index scan, over all its loops) one statement reads,
    from EXPLAIN ANALYZE; a sequential scan of shardq.tasks fails the test."""
    with psycopg.connect(url) as conn:
        text = sqlfiles.query(name, "postgresql", "bucket", limit).as_string(conn)
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text,
                           {"now": None, **params}).fetchone()
    assert row is not None
    total, stack = 0, [row[0][0]["Plan"]]
    while stack:
        node = stack.pop()
        stack.extend(node.get("Plans", []))
        assert not (node["Node Type"] == "Seq Scan" and node.get("Relation Name") == "tasks")
        if node["Node Type"] in ("Index Scan", "Index Only Scan"):
            total += round(node["Actual Rows"] * node["Actual Loops"])  # rows: per loop
    return total


def stats_cost(url: str) -> int:
    """Index entries stats('bulk') reads for its capped counts."""
    cap = max(queuestats.MIN_BUCKET_CAP, queuestats.COUNT_BUDGET // 16)
    return entries_read(url, "stats", cap, {"queue": "bulk", "bucket_count": 16})


def sample_pages_read(url: str) -> int:
    """Table pages the stats' page sample reads, from EXPLAIN (ANALYZE, BUFFERS): only
    TID range scans may read shardq.tasks."""
    with psycopg.connect(url) as conn:
        text = sqlfiles.query("stats_pages", "postgresql", "bucket",
                              samples.SAMPLE_PAGES).as_string(conn)
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + text,
                           {"now": None, "queue": None}).fetchone()
    assert row is not None
    pages, stack = 0, [row[0][0]["Plan"]]
    while stack:
        node = stack.pop()
        stack.extend(node.get("Plans", []))
        if node.get("Relation Name") == "tasks":
            assert node["Node Type"] == "Tid Range Scan", node["Node Type"]
            pages += node["Shared Hit Blocks"] + node["Shared Read Blocks"]
    return pages


@pytest.fixture(scope="module")
def small(databases: Databases) -> str:
    url = databases.create()
    build(url, 10_000)
    return url


@pytest.fixture(scope="module")
def large(databases: Databases) -> str:
    url = databases.create()
    build(url, WAITING * 100 // 99 + 200)  # 2M waiting, besides 1 % locked or dead
    return url


@pytest.mark.slow
def test_stats_on_two_million_waiting_tasks(small: str, large: str) -> None:
    with shardq.Client(small) as client:
        assert client.stats("bulk")["error"] == {}  # 10k tasks: every count exact
    with shardq.Client(large) as client:
        # Two figures, each from a sample of its own (its pages start at random): see below.
        stats, second = client.stats("bulk"), client.stats("bulk")
    real = truth(large)
    assert real["available"] + real["scheduled"] >= WAITING
    # The cost is bounded by the caps, not by the queue: four capped counts and the
    # head of the line per bucket, and the sample's pages (the time it takes is measured
    # by python -m bench.stats_cost, not asserted here).
    assert stats_cost(small) <= 10_000 + 16 * queuestats.HEAD_ROWS
    assert stats_cost(large) <= 4 * queuestats.COUNT_BUDGET + 16 * queuestats.HEAD_ROWS
    assert sample_pages_read(large) <= samples.SAMPLE_PAGES
    for state in ("available", "scheduled", "locked", "dead"):
        error = stats["error"].get(state, 0)
        assert within_stated_error(real[state], state, stats, second), \
            (state, stats[state], second[state], real[state])
        assert (state in stats["exact"]) == (error == 0)
    assert stats["error"]["available"] <= 0.06 * real["available"]
    assert stats["lag_s"] == pytest.approx(stats["oldest_eligible_age_s"])
    assert stats["lag_s"] > 3000  # the first due task was placed an hour ago


RATE_PER_S = 150.0
BACKLOG = 3000


@pytest.fixture
def backlog(databases: Databases) -> str:
    """A queue of 3,000 due tasks written earlier (not counted as recent arrivals)."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.tasks (queue, payload, exec_time) SELECT 'drain', "
                     "'{}', now() - interval '1 minute' FROM generate_series(1, %s)",
                     (BACKLOG,))
    return url


def paced_consumer(client: shardq.Client, stop: threading.Event) -> None:
    """Claims and acks tasks of 'drain' at RATE_PER_S, as a steady fleet of workers would."""
    start, done = time.monotonic(), 0
    while not stop.is_set():
        due = int((time.monotonic() - start) * RATE_PER_S) - done
        if due > 0:
            tasks = client.claim("drain", limit=min(due, 100))
            if not tasks:
                return
            client.ack_many(tasks)
            done += len(tasks)
        time.sleep(0.02)


def test_drain_eta_comes_true(backlog: str) -> None:
    stop = threading.Event()
    with shardq.Client(backlog) as client:
        consumer = threading.Thread(target=paced_consumer, args=(client, stop), daemon=True)
        consumer.start()
        try:
            time.sleep(6)  # the rate is steady
            stats: dict[str, Any] = client.stats("drain", slo_s=300)
            asked = time.monotonic()
            assert stats["completed_per_s"] == pytest.approx(RATE_PER_S, rel=0.15)
            assert stats["enqueued_per_s"] == 0
            wait_for(lambda: scalar(backlog, "SELECT count(*) FROM shardq.tasks") == 0,
                     interval=0.05, what="the queue to drain")
            actual = time.monotonic() - asked
        finally:
            stop.set()
            consumer.join(10)
    print(f"drain ETA {stats['drain_eta_s']:.1f} s, took {actual:.1f} s")
    assert stats["drain_eta_s"] == pytest.approx(actual, rel=0.25)
    # The tasks waited a minute and the line is worked through in seconds: in budget.
    assert stats["slo_breach_in_s"] is None
