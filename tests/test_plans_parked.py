"""The queue figures' count of parked tasks reads the partial index tasks_parked, at most
its cap of entries per reason, never the table: with 150k tasks parked on sleeps (more
than the cap, a tenth of them woken), 3k on events and a few on children, among 100k
due tasks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from shardq.ops import parkedstats
from tests.plans import QUEUE, explain
from tests.test_plans_flows import assert_no_table_scan, composed, scans

pytestmark = pytest.mark.server

SLEEPS, EVENTS, CHILDREN = 150_000, 3_000, 30
PARK = """
    INSERT INTO shardq.tasks (queue, payload, exec_time, parked, wait_event, durable)
    SELECT %(queue)s, '{}', now() + CASE WHEN g %% 10 = 0 THEN -1 ELSE 1 END
                                   * interval '1 hour',
           %(reason)s, CASE WHEN %(reason)s = 'event' THEN 'e-' || g END, true
    FROM generate_series(1, %(n)s) AS g"""


@pytest.fixture(scope="module")
def parked(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """Due tasks, and tasks parked on each reason (a tenth woken), written in turns so
    that parked tasks lie all over the table."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(2):
            conn.execute("""
                INSERT INTO shardq.tasks (queue, payload, exec_time)
                SELECT %s, '{}', now() - interval '1 hour' + g * interval '1 ms'
                FROM generate_series(1, 50000) AS g""", (QUEUE,))
            for reason, n in (("sleep", SLEEPS), ("event", EVENTS), ("children", CHILDREN)):
                conn.execute(PARK, {"queue": QUEUE, "reason": reason, "n": n // 2})
        conn.execute("VACUUM ANALYZE shardq.tasks")
        yield conn


def test_parked_tasks_are_counted_through_tasks_parked(
        parked: psycopg.Connection[Any]) -> None:
    cap = parkedstats.PARKED_BUDGET
    query = composed(parked, "stats_parked", cap)
    plan = explain(parked, query, {"now": None})
    assert_no_table_scan(plan)
    reads = scans(plan, "tasks")
    assert {n["Index Name"] for n in reads} == {"tasks_parked"}
    # One range per reason, the sleeps' cut at the cap: no entry of another reason is
    # read, and no more than the cap of any.
    assert sum(n["Actual Loops"] for n in reads) == len(parkedstats.REASONS)
    assert all(n.get("Rows Removed by Filter", 0) == 0 for n in reads)
    read = sum(n["Actual Rows"] * n["Actual Loops"] for n in reads)  # per loop, rounded
    assert abs(read - (cap + EVENTS + CHILDREN)) < len(parkedstats.REASONS)
    rows = {reason: (n, entries) for reason, queue, n, entries in
            parked.execute(query, {"now": None}).fetchall() if queue == QUEUE}
    # Every entry read counts, but the woken tasks (a tenth) are due: not parked.
    assert rows["event"] == (waiting(EVENTS), EVENTS)
    assert rows["children"] == (waiting(CHILDREN), CHILDREN)
    assert rows["sleep"][1] == cap
    assert cap * 8 // 10 < rows["sleep"][0] < cap


def waiting(n: int) -> int:
    """Of ``n`` tasks parked by the fixture (in two halves), those not woken."""
    return 2 * (n // 2 - n // 2 // 10)
