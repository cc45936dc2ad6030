"""The claims and the janitor's statements on a bucket that is an expression of the id,
not a stored column (docs/design.md, "Changing the bucket count"): a schema of 16
stored buckets given the indexes of a 64-bucket expression layout beside its own, as a
reshard's build phase leaves it.  Composed with that expression for their bucket
(``sqlfiles.bucket_of``), every claim is still one bounded range of one bucket of the
new indexes, in the custom and in the generic plan, and the janitor's statements read
the new partial indexes: the old layout's indexes cannot serve them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from shardq.core import sqlfiles
from shardq.core.dialect import bucket_sql
from shardq.ops import flow
from shardq.ops.claims import LISTED
from tests.plans import LIMIT, PARAMS, QUEUE, explain, explain_prepared
from tests.test_plans import assert_bounded_range_scan

pytestmark = pytest.mark.server

BUCKETS = 64
EXPRESSION = bucket_sql("id", BUCKETS)
LIMITED = "limited-expression"


@pytest.fixture(scope="module")
def reshaped(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """200k due tasks (and some locked, scheduled and head-started ones) in a schema of
    16 stored buckets, with the three bucket indexes of a 64-bucket expression layout."""
    url = databases.create()
    expression = sql.SQL(EXPRESSION)
    with psycopg.connect(url, autocommit=True) as conn:
        for queue in (QUEUE, LIMITED):
            conn.execute("""
                INSERT INTO shardq.tasks (queue, payload, exec_time)
                SELECT %s, '{}', now() - interval '1 hour' + g * interval '1 ms'
                FROM generate_series(1, 100000) AS g""", (queue,))
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
        conn.execute(sql.SQL("CREATE INDEX tasks_claim_64 ON shardq.tasks "
                             "(({}), queue, status, exec_time, id)").format(expression))
        conn.execute(sql.SQL("CREATE INDEX tasks_leases_64 ON shardq.tasks "
                             "(({}), exec_time, id) WHERE status = 'locked'").format(expression))
        conn.execute(sql.SQL("CREATE INDEX tasks_head_starts_64 ON shardq.tasks (({}), exec_time) "
                             "WHERE pending_head_start_s > 0").format(expression))
        conn.execute("VACUUM ANALYZE shardq.tasks")
        yield conn


@pytest.fixture
def expressed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Statements composed with the 64-bucket expression for their bucket."""
    def bucket_of(bucket: str, alias: str | None = None) -> sql.Composable:
        return sql.SQL(bucket_sql("id" if alias is None else alias + ".id", BUCKETS))

    sqlfiles.query.cache_clear()
    monkeypatch.setattr(sqlfiles, "bucket_of", bucket_of)
    yield
    sqlfiles.query.cache_clear()


def composed(conn: psycopg.Connection[Any], name: str,
             fragments: dict[str, Any] | None = None) -> str:
    return sqlfiles.query(name, "postgresql", "bucket", LIMIT,
                          fragments=tuple(sorted((fragments or {}).items()))).as_string(conn)


@pytest.mark.parametrize("generic", [False, True])
def test_a_claim_is_one_bounded_range_of_the_expression_index(
        reshaped: psycopg.Connection[Any], expressed: None, generic: bool) -> None:
    text = composed(reshaped, "claim")
    assert "mod(get_byte(uuid_send(id)" in text
    plan = explain_prepared(reshaped, text, PARAMS, f"claim_expr_{int(generic)}",
                            generic=generic)
    assert_bounded_range_scan(plan, "tasks_claim_64", LIMIT)
    cond = next(n for n in plan if n.get("Index Name") == "tasks_claim_64")["Index Cond"]
    assert "mod(" in cond
    for column in ("queue", "status", "exec_time"):
        assert column in cond


def test_a_claim_of_several_buckets_visits_each_listed_range_of_the_expression_index(
        reshaped: psycopg.Connection[Any], expressed: None) -> None:
    params = {**PARAMS, "queue": "nothing-here", "buckets": [3, 17, 40, 63]}
    plan = explain(reshaped, composed(reshaped, "claim_buckets", LISTED), params)
    assert "Seq Scan" not in [n["Node Type"] for n in plan]
    scans = [n for n in plan if n.get("Index Name") == "tasks_claim_64"]
    assert len(scans) == 1
    assert scans[0]["Actual Loops"] == 4
    assert scans[0]["Actual Rows"] == 0


@pytest.mark.parametrize("generic", [False, True])
def test_a_limited_claim_is_one_bounded_range_of_the_expression_index(
        reshaped: psycopg.Connection[Any], expressed: None, generic: bool) -> None:
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
        reshaped: psycopg.Connection[Any], expressed: None) -> None:
    text = sqlfiles.query("janitor_due", "postgresql", "bucket").as_string(reshaped)
    plan = explain(reshaped, text, {**PARAMS, "buckets": list(range(BUCKETS))})
    assert "Seq Scan" not in [n["Node Type"] for n in plan]
    assert plan[0]["Actual Rows"] == BUCKETS
    probes = {n["Index Name"]: n for n in plan if n.get("Relation Name") == "tasks"}
    assert set(probes) == {"tasks_leases_64", "tasks_head_starts_64"}
    assert all(p["Actual Loops"] == BUCKETS for p in probes.values())


@pytest.mark.parametrize(("name", "index"), [("janitor_rescue", "tasks_leases_64"),
                                             ("janitor_promote", "tasks_head_starts_64")])
def test_the_janitors_statements_read_the_expression_partial_indexes(
        reshaped: psycopg.Connection[Any], expressed: None, name: str, index: str) -> None:
    with reshaped.transaction(force_rollback=True):
        reshaped.execute(sql.SQL(
            "UPDATE shardq.tasks SET exec_time = now() - interval '1 s' WHERE id IN ("
            "SELECT id FROM shardq.tasks WHERE {} = 3 AND (status = 'locked' "
            "OR pending_head_start_s > 0) LIMIT 150)").format(sql.SQL(EXPRESSION)))
        for generic in (False, True):
            plan = explain_prepared(reshaped, composed(reshaped, name), PARAMS,
                                    f"{name}_expr_{int(generic)}", generic=generic)
            assert [n for n in plan if n["Node Type"] == "Seq Scan"
                    and n.get("Relation Name") == "tasks"] == []
            scans = [n for n in plan if n.get("Index Name") == index]
            assert scans, [(n["Node Type"], n.get("Index Name")) for n in plan]
            assert scans[0]["Actual Rows"] <= 150
