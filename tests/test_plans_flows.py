"""Query plans of the flows' statements, with 20k nodes waiting among 50k due tasks: a
claim never reads a waiting node, and every statement of the flows' resolver, cancel and
read reads its own index range or probes its index, never a table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from shardq.core import sqlfiles
from tests.plans import LIMIT, PARAMS, QUEUE, explain

pytestmark = pytest.mark.server

DUE = 50_000
WAITING = 20_000
PER_FLOW = 10  # so 2,000 flows
ENDED = 50_000  # flows that ended, kept for their keep_result_s
WITH_EVENTS = 500  # flows with events not folded in, 3 each


@pytest.fixture(scope="module")
def flows(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """Due tasks, and waiting nodes of flows ahead of them in line (an hour earlier), each
    flow with its row, a node's kept result, and some flows with events to fold."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time)
            SELECT %s, '{}', now() - interval '1 hour' + g * interval '1 ms'
            FROM generate_series(1, %s) AS g""", (QUEUE, DUE))
        conn.execute("""
            CREATE TEMP TABLE f AS
            SELECT g AS n, gen_random_uuid() AS id FROM generate_series(1, %s) AS g""",
                     (WAITING // PER_FLOW,))
        conn.execute("""
            INSERT INTO shardq.flows (id, kind, nodes, keep_result_s, created_at)
            SELECT f.id, 'chord', %s, 60, now() FROM f""", (PER_FLOW,))
        # Flows that ended long ago, as a busy schema keeps for their keep_result_s: the
        # flows table is then large enough that reading it whole is never the cheap way.
        conn.execute("""
            INSERT INTO shardq.flows (id, kind, nodes, keep_result_s, created_at, finished_at)
            SELECT gen_random_uuid(), 'batch', 1, 86400, now(), now()
            FROM generate_series(1, %s)""", (ENDED,))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, status, flow_id, waits,
                                      flow_deps)
            SELECT %s, '{"pass": "list"}', now() - interval '2 hours', 'waiting', f.id, 1,
                   ARRAY[f.id]
            FROM f, generate_series(1, %s)""", (QUEUE, PER_FLOW))
        conn.execute("""
            INSERT INTO shardq.results (id, queue, value, attempts, enqueued_at, finished_at,
                                        expires_at, flow_id)
            SELECT gen_random_uuid(), %s, '1', 1, now(), now(), 'infinity', f.id FROM f""",
                     (QUEUE,))
        conn.execute("""
            INSERT INTO shardq.flow_events (flow_id, at, task_id, outcome)
            SELECT f.id, now() + g * interval '1 ms', gen_random_uuid(), 'succeeded'
            FROM f, generate_series(1, 3) AS g WHERE f.n <= %s""", (WITH_EVENTS,))
        conn.execute("VACUUM ANALYZE")
        yield conn


def composed(conn: psycopg.Connection[Any], name: str, limit: int | None = LIMIT) -> str:
    return sqlfiles.query(name, "postgresql", "bucket", limit).as_string(conn)


BIG = ("tasks", "flows", "flow_events", "results")


def assert_no_table_scan(plan: list[dict[str, Any]]) -> None:
    """No read of a whole table that grows with the work (small ones, such as the
    queues' settings, may be read whole)."""
    whole = [(n["Node Type"], n.get("Relation Name"), n.get("Actual Loops"))
             for n in plan if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in BIG]
    assert not whole, whole


def scans(plan: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """The nodes of ``plan`` that read ``table`` (a bitmap's heap read counted by its
    index scan, which names the index), and ran."""
    found: list[dict[str, Any]] = []
    for n in plan:
        if n.get("Actual Loops", 1) == 0 or n["Node Type"] == "ModifyTable":
            continue
        if n["Node Type"] == "Bitmap Heap Scan" and n.get("Relation Name") == table:
            found.extend(c for c in n.get("Plans", []) if c["Node Type"] == "Bitmap Index Scan")
        elif n.get("Relation Name") == table:
            found.append(n)
    return found


def assert_reads_through(plan: list[dict[str, Any]], table: str, index: str) -> None:
    found = scans(plan, table)
    assert found, [n["Node Type"] for n in plan]
    assert {n.get("Index Name") for n in found} == {index}, found


def flow_ids(conn: psycopg.Connection[Any], n: int, with_events: bool = True) -> list[Any]:
    query = ("SELECT DISTINCT flow_id FROM shardq.flow_events LIMIT %s" if with_events
             else "SELECT id FROM shardq.flows WHERE finished_at IS NULL ORDER BY id DESC "
                  "LIMIT %s")
    rows = conn.execute(query, (n,)).fetchall()
    return [r[0] for r in rows]


def waiting_ids(conn: psycopg.Connection[Any], n: int) -> list[Any]:
    rows = conn.execute("SELECT id FROM shardq.tasks WHERE status = 'waiting' LIMIT %s",
                        (n,)).fetchall()
    return [r[0] for r in rows]


def test_a_claim_never_reads_a_waiting_node(flows: psycopg.Connection[Any]) -> None:
    """Waiting nodes stand first in line (earlier exec_time), in their own range."""
    plan = explain(flows, composed(flows, "claim"), PARAMS)
    assert_no_table_scan(plan)
    [scan] = [n for n in scans(plan, "tasks") if n.get("Parent Relationship") != "InitPlan"
              and n["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert scan["Index Name"] == "tasks_pkey"
    assert "'available'" in scan["Index Cond"]
    assert scan.get("Rows Removed by Filter", 0) == 0
    assert scan["Actual Rows"] == LIMIT
    assert scan["Shared Hit Blocks"] + scan.get("Shared Read Blocks", 0) < 200


def test_flow_pick_is_a_bounded_loose_scan(flows: psycopg.Connection[Any]) -> None:
    limit = 20
    plan = explain(flows, composed(flows, "flow_pick", limit))
    assert_no_table_scan(plan)
    assert_reads_through(plan, "flow_events", "flow_events_pkey")
    # One probe per flow found (and the first), never a read of the 1,500 events.
    probes = sum(n["Actual Loops"] for n in scans(plan, "flow_events"))
    assert probes <= limit + 1
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in scans(plan, "flow_events")) \
        <= limit + 1
    [locked] = [n for n in plan if n["Node Type"] == "LockRows"]
    assert locked["Actual Rows"] == limit
    assert_reads_through(plan, "flows", "flows_pkey")


def test_flow_take_reads_the_locked_flows_ranges(flows: psycopg.Connection[Any]) -> None:
    plan = explain(flows, composed(flows, "flow_take"), {"flows": flow_ids(flows, 5)})
    assert_no_table_scan(plan)
    # Each locked flow's range of the key is read, then its rows deleted by their ctid.
    reads = scans(plan, "flow_events")
    assert {n["Node Type"] for n in reads if "Index Name" not in n} == {"Tid Scan"}
    assert {n["Index Name"] for n in reads if "Index Name" in n} == {"flow_events_pkey"}
    [delete] = [n for n in plan if n["Node Type"] == "ModifyTable"]
    assert delete["Actual Rows"] == 15
    assert all("flow_id" in n["Index Cond"] for n in reads if "Index Name" in n)
    assert all(n.get("Rows Removed by Filter", 0) == 0 for n in reads)


def test_flow_release_probes_tasks_ids(flows: psycopg.Connection[Any]) -> None:
    ids = waiting_ids(flows, 50)
    plan = explain(flows, composed(flows, "flow_release"),
                   {"ids": ids, "counts": [1] * len(ids), "notify": False})
    assert_no_table_scan(plan)
    tasks = scans(plan, "tasks")
    assert {n["Index Name"] for n in tasks} == {"tasks_ids"}
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in tasks) == 50
    # Each released chord callback reads its parents' results by their key.
    assert {n.get("Index Name") for n in scans(plan, "results")} <= {"results_pkey"}


def test_flow_cancel_children_probes_tasks_ids(flows: psycopg.Connection[Any]) -> None:
    ids = waiting_ids(flows, 50)
    plan = explain(flows, composed(flows, "flow_cancel_children"), {"ids": ids, "now": None})
    assert_no_table_scan(plan)
    tasks = scans(plan, "tasks")
    assert {n["Index Name"] for n in tasks} == {"tasks_ids"}
    [delete] = [n for n in plan if n["Node Type"] == "ModifyTable"
                and n.get("Relation Name") == "tasks"]
    assert delete["Actual Rows"] == 50


def test_flow_finish_probes_tasks_flows_and_flow_events(flows: psycopg.Connection[Any]) -> None:
    ids = flow_ids(flows, 20, with_events=False)
    plan = explain(flows, composed(flows, "flow_finish"), {"flows": ids, "now": None})
    assert_no_table_scan(plan)
    assert_reads_through(plan, "flows", "flows_pkey")
    tasks = scans(plan, "tasks")
    assert {n["Index Name"] for n in tasks} == {"tasks_flows"}
    # One probe per flow: the first node found ends it (NOT EXISTS).
    assert all(n["Actual Rows"] <= 1 for n in tasks)
    assert {n.get("Index Name") for n in scans(plan, "flow_events")} <= {"flow_events_pkey"}


@pytest.mark.parametrize("name", ["flow_get", "flow_nodes"])
def test_reading_a_flow_reads_its_nodes_and_results_by_flow(flows: psycopg.Connection[Any],
                                                             name: str) -> None:
    [flow_id] = flow_ids(flows, 1)
    plan = explain(flows, composed(flows, name), {"id": flow_id})
    assert_no_table_scan(plan)
    tasks = scans(plan, "tasks")
    assert {n["Index Name"] for n in tasks} == {"tasks_flows"}
    assert sum(n["Actual Rows"] for n in tasks) == PER_FLOW
    if name == "flow_nodes":
        assert_reads_through(plan, "results", "results_flows")
    else:
        assert_reads_through(plan, "flows", "flows_pkey")
        assert_reads_through(plan, "flow_events", "flow_events_pkey")


def test_an_unknown_flow_reads_nothing(flows: psycopg.Connection[Any]) -> None:
    plan = explain(flows, composed(flows, "flow_nodes"), {"id": uuid.uuid4()})
    assert all(n["Actual Rows"] == 0 for n in scans(plan, "tasks") + scans(plan, "results"))
