"""The plans of every phase of a reshard (``shardq reshard``, shardq.ops.reshard): a
claim, a claim of several buckets, a limited claim and the janitor's statements are
each one bounded range of one bucket, on both layouts while both exist.

``switching`` is a schema of 16 stored buckets that a reshard to 64 has taken through
its build and its switch (the old layout is not yet dropped): statements composed for
the new layout (the bucket an expression of the id) read the new indexes, those
composed for the old one (the column) still read tasks_pkey and its partial indexes.
``resharded`` is a schema that a reshard took to the end: the stored column is gone and
the claims read the expression index alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import shardq
from shardq.core import sqlfiles
from shardq.core.dialect import bucket_expression, expression_bucket
from shardq.ops import flow
from shardq.ops.claims import LISTED
from tests.plans import LIMIT, QUEUE, explain, explain_prepared, past_layout_guard
from tests.plans import PARAMS as GENERATION_0
from tests.test_plans import assert_bounded_range_scan

pytestmark = pytest.mark.server

BUCKETS = 64
EXPRESSION = expression_bucket(BUCKETS)
LIMITED = "limited-expression"
PARAMS = {**GENERATION_0, "generation": 1}  # the layout a reshard switched to


def backlog(url: str, due: int) -> None:
    """``due`` due tasks in each of two queues (one limited), some locked, scheduled
    and head-started ones."""
    with psycopg.connect(url, autocommit=True) as conn:
        for queue in (QUEUE, LIMITED):
            conn.execute("""
                INSERT INTO shardq.tasks (queue, payload, exec_time)
                SELECT %s, '{}', now() - interval '1 hour' + g * interval '1 ms'
                FROM generate_series(1, %s) AS g""", (queue, due))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, status, lease_token, attempts)
            SELECT %s, '{}', now() + interval '10 min', 'locked', gen_random_uuid(), 1
            FROM generate_series(1, 20000)""", (QUEUE,))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, pending_head_start_s)
            SELECT %s, '{}', now() + interval '1 day', 60 FROM generate_series(1, 20000)""",
                     (QUEUE,))
        conn.execute("INSERT INTO shardq.queues (name, max_running) VALUES (%s, 1000)",
                     (LIMITED,))


def analyzed(url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE shardq.tasks")
        yield conn


@pytest.fixture(scope="module")
def switching(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """200k due tasks in a schema of 16 stored buckets that a reshard to 64 has built
    and switched, the old layout still whole."""
    url = databases.create(bucket_count=16)
    backlog(url, 100_000)
    stop = threading.Event()

    def on_step(step: Any) -> None:
        if step.switched:
            stop.set()

    with shardq.Client(url) as client:
        assert client.reshard(BUCKETS, on_step=on_step, stop=stop).phase == "switch"
    yield from analyzed(url)


@pytest.fixture(scope="module")
def resharded(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """The same tasks (a fifth as many due) in a schema resharded from 16 to 64 buckets
    to the end: no stored bucket, no tasks_pkey."""
    url = databases.create(bucket_count=16)
    backlog(url, 20_000)
    with shardq.Client(url) as client:
        assert client.reshard(BUCKETS).phase == "done"
    yield from analyzed(url)


def composed(conn: psycopg.Connection[Any], name: str,
             fragments: dict[str, Any] | None = None, bucket: str = EXPRESSION) -> str:
    return sqlfiles.query(name, "postgresql", bucket, LIMIT,
                          fragments=tuple(sorted((fragments or {}).items()))).as_string(conn)


@pytest.fixture(params=["switching", "resharded"])
def reshaped(request: pytest.FixtureRequest) -> psycopg.Connection[Any]:
    """A schema in a phase where the 64-bucket expression layout is in use."""
    conn: psycopg.Connection[Any] = request.getfixturevalue(request.param)
    return conn


@pytest.mark.parametrize("generic", [False, True])
def test_a_claim_is_one_bounded_range_of_the_expression_index(
        reshaped: psycopg.Connection[Any], generic: bool) -> None:
    text = composed(reshaped, "claim")
    assert 'mod(get_byte(uuid_send("id")' in text
    plan = explain_prepared(reshaped, text, PARAMS, f"claim_expr_{int(generic)}",
                            generic=generic)
    assert_bounded_range_scan(plan, "tasks_claim_64", LIMIT)
    cond = next(n for n in plan if n.get("Index Name") == "tasks_claim_64")["Index Cond"]
    assert "mod(" in cond
    for column in ("queue", "status", "exec_time"):
        assert column in cond


def test_a_claim_of_several_buckets_visits_each_listed_range_of_the_expression_index(
        reshaped: psycopg.Connection[Any]) -> None:
    params = {**PARAMS, "queue": "nothing-here", "buckets": [3, 17, 40, 63]}
    plan = past_layout_guard(explain(reshaped, composed(reshaped, "claim_buckets", LISTED),
                                     params))
    assert "Seq Scan" not in [n["Node Type"] for n in plan]
    scans = [n for n in plan if n.get("Index Name") == "tasks_claim_64"]
    assert len(scans) == 1
    assert scans[0]["Actual Loops"] == 4
    assert scans[0]["Actual Rows"] == 0


@pytest.mark.parametrize("generic", [False, True])
def test_a_limited_claim_is_one_bounded_range_of_the_expression_index(
        reshaped: psycopg.Connection[Any], generic: bool) -> None:
    fragments = flow.limited_fragments(None, False, "rate_unset")
    text = composed(reshaped, "claim_limited", fragments)
    params = {**PARAMS, "queue": LIMITED, "group": None}
    plan = explain_prepared(reshaped, text, params, f"limited_expr_{int(generic)}",
                            generic=generic)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in [n["Node Type"] for n in plan
                              if n.get("Relation Name") == "tasks"], kinds
    ranges = [n for n in plan if n.get("Relation Name") == "tasks"
              and n.get("Index Name") == "tasks_claim_64" and n.get("Actual Loops", 0) > 0]
    assert len(ranges) == 1, [n.get("Index Name") for n in plan]
    assert ranges[0]["Actual Rows"] == LIMIT
    assert ranges[0].get("Rows Removed by Filter", 0) == 0


def test_the_janitors_probe_reads_the_expression_partial_indexes(
        reshaped: psycopg.Connection[Any]) -> None:
    text = sqlfiles.query("janitor_due", "postgresql", EXPRESSION).as_string(reshaped)
    plan = explain(reshaped, text, {**PARAMS, "buckets": list(range(BUCKETS))})
    assert "Seq Scan" not in [n["Node Type"] for n in plan]
    assert plan[0]["Actual Rows"] == BUCKETS
    probes = {n["Index Name"]: n for n in plan if n.get("Relation Name") == "tasks"}
    assert set(probes) == {"tasks_leases_64", "tasks_head_starts_64"}
    assert all(p["Actual Loops"] == BUCKETS for p in probes.values())


@pytest.mark.parametrize(("name", "index"), [("janitor_rescue", "tasks_leases_64"),
                                             ("janitor_promote", "tasks_head_starts_64")])
def test_the_janitors_statements_read_the_expression_partial_indexes(
        reshaped: psycopg.Connection[Any], name: str, index: str) -> None:
    with reshaped.transaction(force_rollback=True):
        reshaped.execute(sql.SQL(
            "UPDATE shardq.tasks SET exec_time = now() - interval '1 s' WHERE id IN ("
            "SELECT id FROM shardq.tasks WHERE {} = 3 AND (status = 'locked' "
            "OR pending_head_start_s > 0) LIMIT 150)").format(
                bucket_expression(sql.Identifier("id"), BUCKETS)))
        for generic in (False, True):
            plan = explain_prepared(reshaped, composed(reshaped, name), PARAMS,
                                    f"{name}_expr_{int(generic)}", generic=generic)
            assert [n for n in plan if n["Node Type"] == "Seq Scan"
                    and n.get("Relation Name") == "tasks"] == []
            scans = [n for n in plan if n.get("Index Name") == index]
            assert scans, [(n["Node Type"], n.get("Index Name")) for n in plan]
            assert scans[0]["Actual Rows"] <= 150


@pytest.mark.parametrize("generic", [False, True])
def test_while_both_layouts_exist_the_old_one_claims_from_its_own_index(
        switching: psycopg.Connection[Any], generic: bool) -> None:
    """A claimer that has not yet read the switch composes for the column, at the
    generation before: its claim is still one bounded range of tasks_pkey.  A claim
    composed for an older layout still takes nothing, the generation guard failing,
    which the plan shows as a range never read."""
    text = composed(switching, "claim", bucket="bucket")
    plan = explain_prepared(switching, text, GENERATION_0,
                            f"claim_old_{int(generic)}", generic=generic)
    assert_bounded_range_scan(plan, "tasks_pkey", LIMIT)
    stale = explain_prepared(switching, text, {**PARAMS, "generation": -1},
                             f"claim_stale_{int(generic)}", generic=generic)
    scan = next(n for n in stale if n.get("Index Name") == "tasks_pkey")
    assert scan.get("Actual Loops", 0) == 0
    assert stale[0]["Actual Rows"] == 0


def test_after_the_reshard_the_stored_layout_is_gone(resharded: psycopg.Connection[Any]) -> None:
    names = {r[0] for r in resharded.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'tasks'").fetchall()}
    assert {"tasks_claim_64", "tasks_leases_64", "tasks_head_starts_64", "tasks_ids"} <= names
    assert not names & {"tasks_pkey", "tasks_leases", "tasks_head_starts"}
    assert resharded.execute("SELECT count(*) FROM information_schema.columns WHERE "
                             "table_name = 'tasks' AND column_name = 'bucket'").fetchone() == (0,)
