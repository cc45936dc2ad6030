"""Query plans of durable tasks' statements, with 20k tasks parked (on sleeps, on events
and on children) among 50k due tasks and 60k checkpoints: a claim never reads a parked
task, an emit finds its waiters through tasks_parked, and every other statement probes
its index or reads its own range of one, never a table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from shardq.ops import durable
from tests.plans import LIMIT, PARAMS, QUEUE, explain
from tests.test_plans_flows import assert_no_table_scan, composed, scans

pytestmark = pytest.mark.server

DUE = 50_000
PARKED = 20_000  # a third each on a sleep, an event and children
STEPS = 3  # checkpoints per parked task
EVENTS = 5_000  # events: the parked tasks' (no payload yet) and emitted ones
BIG = ("tasks", "steps", "events", "flows", "results")


@pytest.fixture(scope="module")
def parked(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """Due tasks, and parked durable tasks (available, due in an hour or never) with
    their checkpoints, their events' rows and their children's flows."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time)
            SELECT %s, '{}', now() - interval '1 hour' + g * interval '1 ms'
            FROM generate_series(1, %s) AS g""", (QUEUE, DUE))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, parked, wait_event, durable)
            SELECT %s, '{}',
                   CASE g %% 3 WHEN 0 THEN now() + interval '1 hour' ELSE '9999-01-01Z' END,
                   (ARRAY['sleep', 'event', 'children'])[g %% 3 + 1],
                   CASE WHEN g %% 3 = 1 THEN 'event-' || (g %% %s) END, true
            FROM generate_series(1, %s) AS g""", (QUEUE, EVENTS, PARKED))
        conn.execute("""
            INSERT INTO shardq.steps (task_id, name, kind, state, value, at)
            SELECT t.id, 'step-' || s, 'step', 'done', '1', now()
            FROM shardq.tasks AS t, generate_series(1, %s) AS s
            WHERE t.durable""", (STEPS,))
        conn.execute("""
            INSERT INTO shardq.events (name, payload, emitted_at, expires_at)
            SELECT 'event-' || g, CASE WHEN g %% 2 = 0 THEN '1'::jsonb END,
                   CASE WHEN g %% 2 = 0 THEN now() END, now() + g * interval '1 s'
            FROM generate_series(0, %s) AS g""", (2 * EVENTS,))
        conn.execute("""
            INSERT INTO shardq.flows (id, kind, nodes, keep_result_s, created_at)
            SELECT id, 'spawn', 1, 86400, now() FROM shardq.tasks WHERE parked = 'children'""")
        conn.execute("""
            INSERT INTO shardq.results (id, queue, value, attempts, enqueued_at, finished_at,
                                        expires_at)
            SELECT gen_random_uuid(), %s, '1', 1, now(), now(), now() + interval '1 day'
            FROM generate_series(1, %s)""", (QUEUE, DUE))
        conn.execute("VACUUM ANALYZE")
        yield conn


def ids(conn: psycopg.Connection[Any], where: str, n: int) -> list[Any]:
    rows = conn.execute("SELECT id FROM shardq.tasks WHERE " + where + " LIMIT %s",
                        (n,)).fetchall()
    return [r[0] for r in rows]


def assert_no_big_table_scan(plan: list[dict[str, Any]]) -> None:
    whole = [(n["Node Type"], n.get("Relation Name")) for n in plan
             if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in BIG]
    assert not whole, whole
    assert_no_table_scan(plan)


def index_names(plan: list[dict[str, Any]], table: str) -> set[Any]:
    return {n.get("Index Name") for n in scans(plan, table)}


def test_a_claim_never_reads_a_parked_task(parked: psycopg.Connection[Any]) -> None:
    """A parked task stands in line at its wake-up time, beyond the claim's range."""
    plan = explain(parked, composed(parked, "claim"), PARAMS)
    assert_no_big_table_scan(plan)
    [scan] = [n for n in scans(plan, "tasks") if n.get("Parent Relationship") != "InitPlan"
              and n["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert scan["Index Name"] == "tasks_pkey"
    assert scan.get("Rows Removed by Filter", 0) == 0
    assert scan["Actual Rows"] == LIMIT


def test_an_emit_wakes_its_waiters_through_tasks_parked(parked: psycopg.Connection[Any]) -> None:
    names = [f"event-{i}" for i in range(1, 21)]
    plan = explain(parked, composed(parked, "event_wake"),
                   {"names": names, "now": None, "notify": False})
    assert_no_big_table_scan(plan)
    reads = scans(plan, "tasks")
    assert index_names(plan, "tasks") == {"tasks_parked"}
    # Only the waiters of these events are read: about PARKED / 3 / EVENTS each.
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in reads) <= 3 * len(names)


def test_an_emit_writes_events_by_their_key(parked: psycopg.Connection[Any]) -> None:
    names = [f"event-{i}" for i in range(1, 201)] + [f"new-{uuid.uuid4()}"]
    plan = explain(parked, composed(parked, "event_emit"),
                   {"names": names, "payloads": ["1"] * len(names), "keep_s": 60.0,
                    "now": None})
    assert_no_big_table_scan(plan)
    assert index_names(plan, "events") <= {"events_pkey", None}


def test_a_fold_wakes_parents_by_their_ids(parked: psycopg.Connection[Any]) -> None:
    parents = ids(parked, "parked = 'children'", 50)
    plan = explain(parked, composed(parked, "parents_wake"),
                   {"ids": parents, "now": None, "notify": False})
    assert_no_big_table_scan(plan)
    assert index_names(plan, "tasks") == {"tasks_ids"}


def test_checkpoints_are_read_as_one_range_of_their_key(parked: psycopg.Connection[Any]) -> None:
    [task_id] = ids(parked, "durable", 1)
    plan = explain(parked, composed(parked, "steps_load"), {"id": task_id, "now": None})
    assert_no_big_table_scan(plan)
    [scan] = scans(plan, "steps")
    assert scan["Index Name"] == "steps_pkey"
    assert scan["Actual Rows"] == STEPS


def test_a_checkpoint_is_written_under_its_tasks_lease(parked: psycopg.Connection[Any]) -> None:
    [task_id] = ids(parked, "parked = 'sleep'", 1)
    plan = explain(parked, composed(parked, "step_save"), {
        "id": task_id, "token": uuid.uuid4(), "name": "n", "kind": "step", "state": "done",
        "value": "1", "until": None, "now": None})
    assert_no_big_table_scan(plan)
    assert index_names(plan, "tasks") == {"tasks_ids"}
    assert index_names(plan, "steps") <= {"steps_pkey"}


def test_a_park_probes_its_tasks_events_and_flows(parked: psycopg.Connection[Any]) -> None:
    tasks = ids(parked, "parked IS NOT NULL", 60)
    n = len(tasks)
    reasons = (["sleep", "event", "children"] * n)[:n]
    plan = explain(parked, composed(parked, "park_many"), {
        "ids": tasks, "tokens": [uuid.uuid4()] * n, "untils": [durable.NEVER] * n,
        "reasons": reasons, "events": [f"event-{i}" if r == "event" else None
                                       for i, r in enumerate(reasons)],
        "seen": [0] * n, "notes": [""] * n, "event_keep_s": 60.0, "now": None,
        "attempts_kept": 20})
    assert_no_big_table_scan(plan)
    assert index_names(plan, "tasks") == {"tasks_ids"}
    assert index_names(plan, "flows") <= {"flows_pkey"}
    assert index_names(plan, "events") <= {"events_pkey", None}


def test_a_parent_reads_its_children_by_their_ids(parked: psycopg.Connection[Any]) -> None:
    [parent] = ids(parked, "parked = 'children'", 1)
    children = ids(parked, "parked IS NULL", 100)
    plan = explain(parked, composed(parked, "children_state"),
                   {"parent": parent, "ids": children})
    assert_no_big_table_scan(plan)
    assert index_names(plan, "tasks") == {"tasks_ids"}
    assert index_names(plan, "results") <= {"results_pkey"}
    assert index_names(plan, "flows") == {"flows_pkey"}


def test_the_events_retention_reads_events_expiry(parked: psycopg.Connection[Any]) -> None:
    plan = explain(parked, composed(parked, "events_purge", 50), {"now": None})
    assert_no_big_table_scan(plan)
    assert "events_expiry" in index_names(plan, "events")


def test_an_ack_deletes_a_durable_tasks_checkpoints_by_their_key(
        parked: psycopg.Connection[Any]) -> None:
    tasks = ids(parked, "durable", 50)
    parked.execute("UPDATE shardq.tasks SET status = 'locked', lease_token = %s "
                   "WHERE id = ANY(%s)", (PARAMS["token"], tasks))
    try:
        plan = explain(parked, composed(parked, "ack_many"), {
            "ids": tasks, "tokens": [PARAMS["token"]] * len(tasks), "now": None,
            "attempts_kept": 20})
    finally:
        parked.execute("UPDATE shardq.tasks SET status = 'available', lease_token = NULL "
                       "WHERE id = ANY(%s)", (tasks,))
    assert_no_big_table_scan(plan)
    [delete] = [n for n in plan if n["Node Type"] == "ModifyTable"
                and n.get("Relation Name") == "steps"]
    assert delete["Actual Rows"] == 0 or delete["Actual Rows"] == len(tasks) * STEPS
    assert index_names(plan, "steps") == {"steps_pkey"}
