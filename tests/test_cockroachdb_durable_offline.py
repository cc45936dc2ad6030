"""Durable tasks on CockroachDB, checked without a cluster: revision 0027 as rendered for
it, and the shape of every statement durable tasks add, as composed for it.

What the statements rely on, each documented for CockroachDB: data-modifying CTEs, each
table written once per statement; ``INSERT ... ON CONFLICT ... DO UPDATE ... WHERE``
with ``RETURNING`` (a park's event row, an emit's first write, a checkpoint's first
write); ``SELECT ... FOR UPDATE`` in a CTE (a parent locking its children's flow);
``unnest`` of parallel arrays, ``WITH ORDINALITY``; ``greatest`` over timestamps and
``'infinity'::timestamptz``.  Under CockroachDB's serializable isolation a park and an
emit that cross are ordered by the event row they both write, or one of them is
retried (40001, which shardq retries whole).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from shardq.core import sqlfiles
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
TABLES = ("tasks", "steps", "events", "flows", "flow_events", "results", "attempts",
          "throughput")
STATEMENTS = ("steps_load", "step_save", "park_many", "event_emit", "event_get",
              "event_wake", "parents_wake", "children_state", "spawn_flow", "events_purge")
# The statements that delete tasks, and with them a durable task's checkpoints.
DELETING = ("ack_many", "ack_results", "task_cancel", "dead_delete", "dead_purge",
            "queue_purge", "janitor_purge_dead")


@pytest.fixture(scope="module")
def pglast() -> Any:
    return pytest.importorskip("pglast", reason="pglast (PostgreSQL's parser) is not installed")


def code(name: str, limit: int | None = 100) -> str:
    """Statement ``name`` composed for CockroachDB, without comments, on one line."""
    return flat(strip_comments(as_text(sqlfiles.query(name, "cockroachdb", SHARD_16, limit))))


def test_crdb_0027_adds_durable_tasks_in_nine_rerunnable_statements() -> None:
    needs_crdb_dialect()
    step = next(s for s in revisions(render_upgrade("cockroachdb", BUCKETS))
                if s.endswith("->0027"))
    (columns, parked_check, tasks_parked, steps, events, expiry, folded, kinds,
     outcomes) = revisions(render_upgrade("cockroachdb", BUCKETS))[step]
    assert columns == ("ALTER TABLE shardq.tasks ADD COLUMN IF NOT EXISTS parked text, "
                       "ADD COLUMN IF NOT EXISTS wait_event text, "
                       "ADD COLUMN IF NOT EXISTS durable boolean")
    assert parked_check.startswith("ALTER TABLE shardq.tasks DROP CONSTRAINT IF EXISTS "
                                   "tasks_parked_check, ADD CONSTRAINT tasks_parked_check")
    assert tasks_parked == ("CREATE INDEX IF NOT EXISTS tasks_parked ON shardq.tasks "
                            "(parked, wait_event) WHERE parked IS NOT NULL")
    # Checkpoints are keyed by their task's random id: no range of the key is hot.
    assert "CONSTRAINT steps_pkey PRIMARY KEY (task_id, name))" in steps
    assert (f"CONSTRAINT events_pkey PRIMARY KEY (name) USING HASH WITH (bucket_count = "
            f"{BUCKETS})" in events)
    # Expiry times grow with the clock: hash-sharded, or they would all land in one range.
    assert expiry == ("CREATE INDEX IF NOT EXISTS events_expiry ON shardq.events (expires_at) "
                      "USING HASH")
    assert folded == ("ALTER TABLE shardq.flows ADD COLUMN IF NOT EXISTS folded bigint "
                      "NOT NULL DEFAULT 0")
    assert "'spawn'" in kinds
    assert "'parked'" in outcomes
    downgrade = render_downgrade("cockroachdb", BUCKETS)
    for stmt in ("DROP TABLE IF EXISTS shardq.events", "DROP TABLE IF EXISTS shardq.steps",
                 "DROP INDEX IF EXISTS shardq.tasks@tasks_parked",
                 "DELETE FROM shardq.flows WHERE kind = 'spawn'",
                 "DELETE FROM shardq.attempts WHERE outcome = 'parked'"):
        assert stmt in downgrade


@pytest.mark.parametrize("name", STATEMENTS)
def test_crdb_durable_statement_writes_each_table_at_most_once(pglast: Any, name: str) -> None:
    """CockroachDB refuses a statement that modifies one table twice; none of these
    notifies (no LISTEN there) or reads a ctid."""
    text = code(name)
    for table in TABLES:
        assert len(re.findall(WRITES_TO.format(table=table), text)) <= 1, table
    assert "pg_notify" not in text
    assert not re.search(r"\bctid\b|advisory|MATERIALIZED", text, re.I)
    assert len(pglast.parse_sql(for_postgresql_parser(text)[0])) == 1


def test_crdb_emit_writes_the_payload_once_and_wakes_in_a_second_statement() -> None:
    """The first emit wins (the update only fills a row without a payload); the wake is
    a statement of its own, so that it sees a park the emit's write waited for."""
    emit, wake = code("event_emit"), code("event_wake")
    assert "ON CONFLICT (name) DO UPDATE SET" in emit
    assert emit.endswith("WHERE e.emitted_at IS NULL RETURNING e.name")
    assert "ORDER BY u.name" in emit  # the same order as a park writes event rows
    assert "UPDATE shardq.tasks AS t SET exec_time = c.now" in wake
    assert "t.parked = 'event' AND t.wait_event = ANY(" in wake


def test_crdb_park_takes_the_event_row_and_the_childrens_flow() -> None:
    park = code("park_many")
    assert "INSERT INTO shardq.events AS e (name, expires_at)" in park
    assert "ORDER BY p.event ON CONFLICT (name) DO UPDATE SET" in park
    assert "RETURNING e.name, e.emitted_at" in park
    assert "ORDER BY f.id FOR UPDATE" in park
    assert "WHERE t.id = a.id AND t.lease_token = a.lease_token AND t.status = 'locked'" in park
    assert "attempts = t.attempts - 1" in park  # parking is not an attempt


@pytest.mark.parametrize("name", DELETING)
def test_crdb_a_deleted_durable_task_takes_its_checkpoints(name: str) -> None:
    text = code(name)
    assert "DELETE FROM shardq.steps AS s WHERE s.task_id = ANY(ARRAY(" in text
    assert "WHERE g.durable" in text or "WHERE done.durable" in text


def test_crdb_a_claim_clears_the_park() -> None:
    assert "parked = NULL, wait_event = NULL" in code("claim")
