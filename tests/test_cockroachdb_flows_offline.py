"""The flows on CockroachDB, checked without a cluster: revision 0026 as rendered for it, and
the shape of every statement flows add or change, as composed for it.

What the statements rely on, each documented for CockroachDB: recursive CTEs (which it
runs until the recursive term yields nothing, whatever LIMIT reads them: flow_pick
counts its own steps), ``SELECT ... FOR UPDATE SKIP LOCKED``, ``DELETE ... ORDER BY ...
LIMIT`` (flow_take's own file; PostgreSQL's deletes by ctid, which CockroachDB has
not), ``jsonb_object_agg``, ``unnest(...) WITH ORDINALITY``, ordered aggregates,
``jsonb_set`` with a ``text[]`` path, the JSONB ``?`` operator, array subscripts, and
data-modifying CTEs, each table written once per statement.  A flow's tasks are written
by one INSERT of parallel arrays there (flow_insert): CockroachDB has no binary COPY.
The real cluster runs a chord in ``test_cockroachdb_cluster.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from shardq.core import dialect, sqlfiles
from shardq.loops.resolver import EVENTS_PER_FOLD, FLOWS_PER_FOLD
from tests.test_cockroachdb_offline import (
    SHARD_16,
    WRITES_TO,
    as_text,
    flat,
    for_postgresql_parser,
    needs_crdb_dialect,
    render_downgrade,
    render_upgrade,
    revisions,
    strip_comments,
)

BUCKETS = 16
TABLES = ("tasks", "flows", "flow_events", "results", "attempts", "throughput")


@pytest.fixture(scope="module")
def pglast() -> Any:
    return pytest.importorskip("pglast", reason="pglast (PostgreSQL's parser) is not installed")


def parseable(text: str) -> str:
    """``text`` for PostgreSQL's parser: a CockroachDB DELETE's ORDER BY and LIMIT left out."""
    return for_postgresql_parser(re.sub(r"\bORDER BY [\w., ]+ LIMIT \d+ RETURNING\b",
                                        "RETURNING", text))[0]


def code(name: str, limit: int | None = None, engine: str = "cockroachdb") -> str:
    """Statement ``name`` composed for ``engine``, without comments, on one line."""
    return flat(strip_comments(as_text(sqlfiles.query(name, engine, SHARD_16, limit))))


# -- revision 0026 ------------------------------------------------------------------------


def test_crdb_0026_adds_the_flows_in_eight_rerunnable_statements() -> None:
    needs_crdb_dialect()
    step = revisions(render_upgrade("cockroachdb", BUCKETS))["0025->0026"]
    assert step == [
        "ALTER TABLE shardq.tasks ADD COLUMN IF NOT EXISTS flow_id uuid, "
        "ADD COLUMN IF NOT EXISTS flow_next uuid[], ADD COLUMN IF NOT EXISTS flow_deps uuid[], "
        "ADD COLUMN IF NOT EXISTS waits integer",
        "ALTER TABLE shardq.tasks DROP CONSTRAINT IF EXISTS tasks_status_check, "
        "ADD CONSTRAINT tasks_status_check "
        "CHECK (status IN ('available', 'locked', 'dead', 'waiting'))",
        "CREATE INDEX IF NOT EXISTS tasks_flows ON shardq.tasks (flow_id, status) "
        "WHERE flow_id IS NOT NULL",
        step[3],  # the flows table, below
        "CREATE INDEX IF NOT EXISTS flows_finished ON shardq.flows (finished_at) USING HASH "
        "WHERE finished_at IS NOT NULL",
        step[5],  # flow_events, below
        "ALTER TABLE shardq.results ADD COLUMN IF NOT EXISTS flow_id uuid",
        "CREATE INDEX IF NOT EXISTS results_flows ON shardq.results (flow_id) "
        "WHERE flow_id IS NOT NULL",
    ]
    flows, events = step[3], step[5]
    assert flows.startswith("CREATE TABLE IF NOT EXISTS shardq.flows (id uuid NOT NULL, ")
    # Flow ids are random there (shardq.core.dialect), the key hash-sharded as results'.
    assert flows.endswith(f"CONSTRAINT flows_pkey PRIMARY KEY (id) USING HASH WITH "
                          f"(bucket_count = {BUCKETS}))")
    assert events.startswith("CREATE TABLE IF NOT EXISTS shardq.flow_events (")
    # A flow's events are one range of the key, which its flow's random id places.
    assert events.endswith(
        "CONSTRAINT flow_events_pkey PRIMARY KEY (flow_id, at, task_id, outcome))")
    assert "USING HASH" not in events


def test_postgresql_0026_has_no_engine_of_its_own() -> None:
    step = revisions(render_upgrade("postgresql", BUCKETS))["0025->0026"]
    assert len(step) == 8
    assert not [s for s in step if "USING HASH" in s or "crdb" in s]
    assert "CONSTRAINT flows_pkey PRIMARY KEY (id))" in step[3]


def test_crdb_0026_downgrade_addresses_indexes_by_table_and_drops_the_waiting_tasks() -> None:
    needs_crdb_dialect()
    step = revisions(render_downgrade("cockroachdb", BUCKETS))["0026->0025"]
    assert step == [
        "DROP INDEX IF EXISTS shardq.results@results_flows",
        "ALTER TABLE shardq.results DROP COLUMN IF EXISTS flow_id",
        "DROP TABLE IF EXISTS shardq.flow_events",
        "DROP TABLE IF EXISTS shardq.flows",
        "DROP INDEX IF EXISTS shardq.tasks@tasks_flows",
        # Rows the older check would refuse go before it comes back.
        "DELETE FROM shardq.tasks WHERE status = 'waiting'",
        "ALTER TABLE shardq.tasks DROP CONSTRAINT IF EXISTS tasks_status_check, "
        "ADD CONSTRAINT tasks_status_check CHECK (status IN ('available', 'locked', 'dead'))",
        "ALTER TABLE shardq.tasks DROP COLUMN IF EXISTS waits, DROP COLUMN IF EXISTS flow_deps, "
        "DROP COLUMN IF EXISTS flow_next, DROP COLUMN IF EXISTS flow_id",
    ]


# -- the statements -----------------------------------------------------------------------

# The statements flows add, and the limit the client composes each with.
FLOW_STATEMENTS = {"flow_create": None, "flow_insert": None, "flow_seal": None,
                   "flow_get": None, "flow_nodes": 1000, "flow_lock": None,
                   "flow_cancel": None, "flow_pick": FLOWS_PER_FOLD,
                   "flow_take": EVENTS_PER_FOLD, "flow_count": None,
                   "flow_cancel_children": None, "flow_release": None, "flow_finish": None,
                   "flow_purge": 100}
# The statements that end a task, each leaving an event for its flow's resolver.
ENDING = {"ack_many": "succeeded", "ack_results": "succeeded", "nack_many": "dead",
          "janitor_rescue": "dead", "task_cancel": "cancelled", "dead_retry": "retried",
          "dead_delete": "dropped", "dead_purge": "dropped", "janitor_purge_dead": "dropped",
          "queue_purge": "cancelled", "flow_cancel_children": "cancelled"}


@pytest.mark.parametrize("name", sorted({*FLOW_STATEMENTS, *ENDING}))
def test_crdb_flow_statements_write_each_table_once(name: str) -> None:
    """CockroachDB refuses a statement that modifies a table twice."""
    text = code(name, FLOW_STATEMENTS.get(name, 25))
    for table in TABLES:
        assert len(re.findall(WRITES_TO.format(table=table), text)) <= 1, table
    assert "ctid" not in text
    assert "pg_notify" not in text


@pytest.mark.parametrize(("name", "outcome"), sorted(ENDING.items()))
def test_crdb_a_statement_that_ends_tasks_leaves_one_event_each(name: str, outcome: str) -> None:
    text = code(name, 25)
    assert len(re.findall(WRITES_TO.format(table="flow_events"), text)) == 1
    assert f"'{outcome}'::text AS outcome" in text
    assert ("INSERT INTO shardq.flow_events (flow_id, at, task_id, outcome, next) "
            "SELECT e.flow_id, coalesce(%(now)s::timestamptz, now()), e.id, e.outcome, e.next "
            "FROM flow_ended AS e WHERE e.flow_id IS NOT NULL ON CONFLICT DO NOTHING") in text


def test_crdb_flow_pick_stops_its_loose_scan_at_the_limit(pglast: Any) -> None:
    from pglast import ast, enums

    assert FLOWS_PER_FOLD == 64  # the statement below, as the resolver sends it
    text = code("flow_pick", FLOWS_PER_FOLD)
    assert ("(SELECT e.flow_id, 1 FROM shardq.flow_events AS e ORDER BY e.flow_id LIMIT 1) "
            "UNION ALL SELECT (SELECT e.flow_id FROM shardq.flow_events AS e "
            "WHERE e.flow_id > f.flow_id ORDER BY e.flow_id LIMIT 1), f.n + 1 FROM f "
            "WHERE f.flow_id IS NOT NULL AND f.n < 64 )") in text
    (raw,) = pglast.parse_sql(parseable(text))
    select = raw.stmt
    assert isinstance(select, ast.SelectStmt)
    assert select.withClause is not None
    assert select.withClause.recursive
    assert select.lockingClause is not None
    (locking,) = select.lockingClause
    assert locking.strength == enums.LockClauseStrength.LCS_FORUPDATE
    assert locking.waitPolicy == enums.LockWaitPolicy.LockWaitSkip
    assert select.limitCount is None  # the recursion stops itself: no LIMIT to wait for
    assert select.fromClause is not None
    (flows,) = select.fromClause
    assert isinstance(flows, ast.RangeVar)
    assert (flows.schemaname, flows.relname) == ("shardq", "flows")


def test_crdb_flow_take_deletes_with_order_by_and_limit(pglast: Any) -> None:
    from pglast import ast

    assert EVENTS_PER_FOLD == 5000  # the statement below, as the resolver sends it
    text = code("flow_take", EVENTS_PER_FOLD)
    assert re.sub(r"\be\.| AS e\b", "", text) == (
        "DELETE FROM shardq.flow_events WHERE flow_id = ANY(%(flows)s::uuid[]) "
        "ORDER BY flow_id, at LIMIT 5000 "
        "RETURNING flow_id, at, task_id, outcome, next, n")
    (raw,) = pglast.parse_sql(parseable(text))
    assert isinstance(raw.stmt, ast.DeleteStmt)
    # PostgreSQL's own takes the same rows and deletes them by ctid.
    postgresql = code("flow_take", EVENTS_PER_FOLD, "postgresql")
    assert re.search(r"\bctid = ANY\(ARRAY\( ?SELECT", postgresql)
    assert "LIMIT 5000" in postgresql


def test_crdb_flow_release_finds_tasks_by_id_and_builds_their_arguments(pglast: Any) -> None:
    from pglast import ast

    text = code("flow_release")
    assert "UPDATE shardq.tasks AS t SET" in text
    assert "WHERE t.id = d.id AND t.status = 'waiting'" in text  # tasks_ids, then the key
    assert "NOT t.payload ? 'pass'" in text
    assert "jsonb_set(t.payload, ARRAY['args'], jsonb_build_array(" in text
    assert "WHERE r.id = t.flow_deps[1]" in text
    assert re.search(r"jsonb_agg\(.* ORDER BY p\.n\)", text)
    assert "FROM unnest(t.flow_deps) WITH ORDINALITY AS p(id, n)" in text
    assert "{" not in text
    (raw,) = pglast.parse_sql(parseable(text))
    assert isinstance(raw.stmt, ast.SelectStmt)


@pytest.mark.parametrize("name", sorted(FLOW_STATEMENTS))
def test_crdb_flow_statement_parses_as_one_statement(pglast: Any, name: str) -> None:
    assert len(pglast.parse_sql(parseable(code(name, FLOW_STATEMENTS[name])))) == 1


def test_crdb_writes_a_flows_tasks_without_copy() -> None:
    assert dialect.COCKROACHDB.copy is False  # shardq.ops.graphs takes flow_insert there
    text = code("flow_insert")
    assert "INSERT INTO shardq.tasks AS t" in text
    assert "CASE WHEN src.waits > 0 THEN 'waiting' ELSE 'available' END" in text
    assert text.endswith("SELECT ins.queue, NULL FROM ins WHERE ins.status = 'available' "
                         "GROUP BY ins.queue")  # no NOTIFY: its workers poll


def test_crdb_flow_reads_aggregate_as_cockroachdb_does() -> None:
    text = code("flow_get")
    assert text.count("jsonb_object_agg(") == 2
    assert "'{}'::jsonb" in text  # the doubled braces of the file, composed
    assert "WHERE t.flow_id = f.id GROUP BY t.status" in text  # tasks_flows
