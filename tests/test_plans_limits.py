"""Query plans of flow-controlled claims over a 200k-task backlog, with a 100k-task group
beside a small one: each claim reads one bounded index range
(one bucket's of the primary key, or one group's of tasks_groups_waiting), and the
capacity it checks is read from the small partial indexes of running tasks only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from shardq.core import sqlfiles
from shardq.ops import flow
from tests.plans import LIMIT, PARAMS, QUEUE, explain, past_layout_guard

pytestmark = pytest.mark.server

FAIR = "fair"
RUNNING = ("tasks_slots", "tasks_group_slots")


@pytest.fixture(scope="module")
def grouped(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """200k waiting tasks of queue 'bulk', and a queue whose group 'a' has 100k waiting
    tasks, 'b' ten, and 50 running tasks holding slots; both queues have limits."""
    with psycopg.connect(databases.create(), autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time)
            SELECT %s, '{}', now() - interval '1 hour' + g * interval '1 ms'
            FROM generate_series(1, 200000) AS g""", (QUEUE,))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, task_group, payload, exec_time)
            SELECT %s, CASE WHEN g <= 100000 THEN 'a' ELSE 'b' END, '{}',
                   now() - interval '1 hour' + g * interval '1 ms'
            FROM generate_series(1, 100010) AS g""", (FAIR,))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, task_group, payload, exec_time, status, lease_token,
                                      attempts, slot, group_slot)
            SELECT %s, 'a', '{}', now() + interval '10 min', 'locked', gen_random_uuid(), 1, g, g
            FROM generate_series(1, 50) AS g""", (FAIR,))
        conn.execute("INSERT INTO shardq.queues (name, max_running, max_running_per_group) "
                     "VALUES (%s, 1000, 500), (%s, 1000, NULL)", (FAIR, QUEUE))
        conn.execute("VACUUM ANALYZE shardq.tasks")
        yield conn


def limited(conn: psycopg.Connection[Any], group: str | None, grouped: bool) -> str:
    """The limited claim the client sends for ``group`` (None: the ungrouped tasks of a
    queue with or without waiting grouped tasks), with its rate tokens spent."""
    fragments = flow.limited_fragments(group, grouped, "rate_spent")
    return sqlfiles.query("claim_limited", "postgresql", "bucket", LIMIT,
                          fragments=tuple(sorted(fragments.items()))).as_string(conn)


def assert_one_bounded_range(plan: list[dict[str, Any]], index: str) -> None:
    plan = past_layout_guard(plan)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert "Bitmap Heap Scan" not in kinds, kinds
    scans = [n for n in plan if n.get("Relation Name") == "tasks"
             and n["Node Type"] in ("Index Scan", "Index Only Scan")
             and n.get("Actual Loops", 0) > 0]
    ranges = [n for n in scans if n["Index Name"] not in RUNNING]
    assert [n["Index Name"] for n in ranges] == [index], [n["Index Name"] for n in scans]
    (scan,) = ranges
    assert scan["Actual Rows"] == LIMIT  # stops at the limit: no read of the backlog
    assert scan.get("Rows Removed by Filter", 0) == 0
    # What the capacity check reads: the running tasks' slots, a few pages.
    for n in scans:
        if n["Index Name"] in RUNNING:
            assert n["Shared Hit Blocks"] + n.get("Shared Read Blocks", 0) < 50


def test_a_limited_claim_of_a_bucket_reads_one_range(grouped: psycopg.Connection[Any]) -> None:
    plan = explain(grouped, limited(grouped, None, False),
                   {**PARAMS, "group": None})
    assert_one_bounded_range(plan, "tasks_pkey")
    assert plan[0]["Actual Rows"] == LIMIT


def test_a_groups_claim_reads_one_range_of_its_group(grouped: psycopg.Connection[Any]) -> None:
    params = {**PARAMS, "queue": FAIR, "group": "a", "token": uuid.uuid4()}
    plan = explain(grouped, limited(grouped, "a", True), params)
    assert_one_bounded_range(plan, "tasks_groups_waiting")
    assert plan[0]["Actual Rows"] == LIMIT
    assert "Sort" not in [n["Node Type"] for n in plan if n.get("Relation Name") == "tasks"]


def test_an_ungrouped_turn_beside_a_large_group_reads_a_bounded_prefix(
        grouped: psycopg.Connection[Any]) -> None:
    params = {**PARAMS, "queue": FAIR, "group": None}
    plan = explain(grouped, limited(grouped, None, True), params)
    scans = [n for n in plan if n.get("Index Name") == "tasks_pkey"]
    assert scans
    # The bound and the range together read at most 4 * limit + 1 waiting tasks of the
    # bucket, not the bucket's ~6k grouped ones.
    assert sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans) \
        <= 2 * (4 * LIMIT + 1)
    assert plan[0]["Actual Rows"] == 0  # every task there has a group


def test_the_next_group_is_one_descent(grouped: psycopg.Connection[Any]) -> None:
    text = sqlfiles.query("group_next", "postgresql", "bucket").as_string(grouped)
    plan = explain(grouped, text, {"queue": FAIR, "after": "a"})
    scans = [n for n in plan if n.get("Relation Name") == "tasks"]
    assert [n["Index Name"] for n in scans] == ["tasks_groups_waiting"]
    assert scans[0]["Actual Rows"] == 1
    assert scans[0]["Shared Hit Blocks"] + scans[0].get("Shared Read Blocks", 0) < 20


def test_the_plain_claim_of_a_limited_queue_reads_no_task(
        grouped: psycopg.Connection[Any]) -> None:
    text = sqlfiles.query("claim", "postgresql", "bucket", LIMIT).as_string(grouped)
    plan = explain(grouped, text, PARAMS)
    ranges = [n for n in plan if n.get("Index Name") == "tasks_pkey"]
    assert ranges
    assert all(n["Actual Loops"] == 0 for n in ranges)
    assert plan[0]["Actual Rows"] == 0


@pytest.fixture(scope="module")
def crowded(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """Queue 'wide' under max_running 1,000,000 with 5,000 running tasks holding slots
    (spread over the range) beside 10k waiting ones."""
    with psycopg.connect(databases.create(), autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time)
            SELECT 'wide', '{}', now() - interval '1 hour' + g * interval '1 ms'
            FROM generate_series(1, 10000) AS g""")
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, status, lease_token,
                                      attempts, slot)
            SELECT 'wide', '{}', now() + interval '10 min', 'locked', gen_random_uuid(), 1,
                   g * 199
            FROM generate_series(1, 5000) AS g""")
        conn.execute("INSERT INTO shardq.queues (name, max_running) VALUES ('wide', 1000000)")
        conn.execute("VACUUM ANALYZE shardq.tasks")
        yield conn


def running_reads(plan: list[dict[str, Any]]) -> int:
    """Entries of tasks_slots (the running tasks' slots) the plan read, over all loops."""
    return sum(n["Actual Rows"] * n.get("Actual Loops", 1) for n in plan
               if n.get("Index Name") == "tasks_slots")


def test_a_claim_under_a_large_limit_does_not_read_the_running_tasks(
        crowded: psycopg.Connection[Any]) -> None:
    """Above 1024 the slots are drawn at random and probed one by one: a claim reads a
    few of the 5,000 running tasks' entries, not all of them."""
    params = {**PARAMS, "queue": "wide", "group": None}
    plan = explain(crowded, limited(crowded, None, False), params)
    assert plan[0]["Actual Rows"] == LIMIT
    assert running_reads(plan) < LIMIT  # probes that hit a running task, at most
    # Once the limit is lowered below a running task's slot, the running tasks are counted.
    crowded.execute("UPDATE shardq.queues SET max_running = 900000 WHERE name = 'wide'")
    try:
        plan = explain(crowded, limited(crowded, None, False), params)
    finally:
        crowded.execute("UPDATE shardq.queues SET max_running = 1000000 WHERE name = 'wide'")
    assert plan[0]["Actual Rows"] == LIMIT
    assert running_reads(plan) >= 5000
