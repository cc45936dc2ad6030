"""Migrations: up and down, re-runnable, bucket count, and no drift from sql/schema.sql."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import shardq
from shardq.core import migrate
from shardq.core.dialect import bucket_sql
from tests.helpers import free_port

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parent.parent
HEAD = max(p.name[:4] for p in (ROOT / "migrations" / "versions").glob("0*.py"))

DESCRIBE = {
    "columns": """
        SELECT table_name, column_name, data_type, is_nullable, coalesce(column_default, ''),
               coalesce(generation_expression, '')
        FROM information_schema.columns WHERE table_schema = 'shardq'
        ORDER BY table_name, column_name""",
    "constraints": """
        SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'shardq'::regnamespace ORDER BY conname""",
    "indexes": """
        SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'shardq' ORDER BY 1""",
    "options": """
        SELECT relname, reloptions FROM pg_class
        WHERE relnamespace = 'shardq'::regnamespace AND relkind = 'r' ORDER BY 1""",
}


def describe(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {k: conn.execute(q).fetchall() for k, q in DESCRIBE.items()}


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_schema || '.' || table_name FROM "
                            "information_schema.tables WHERE table_schema NOT IN "
                            "('pg_catalog', 'information_schema')").fetchall()
    return {r[0] for r in rows}


def test_schema_matches_the_snapshot(databases: Any) -> None:
    migrated = databases.create()
    snapshot = databases.create(migrated=False)
    with psycopg.connect(snapshot, autocommit=True) as conn:
        snapshot_sql = (ROOT / "sql" / "schema.sql").read_text()
        conn.execute(snapshot_sql.replace("{bucket_sql}", bucket_sql("id", 16)))
    assert describe(migrated) == describe(snapshot)
    assert describe(migrated)["indexes"]  # the comparison compared something


def test_upgrade_downgrade_upgrade(databases: Any) -> None:
    url = databases.create(migrated=False)
    migrate.upgrade(url, output=io.StringIO())
    assert {"shardq.tasks", "public.shardq_alembic_version"} <= tables(url)
    migrate.upgrade(url, output=io.StringIO())  # at head: nothing to do
    migrate.downgrade(url)
    assert tables(url) == set()  # the version table goes too
    assert migrate.current(url) is None
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'shardq'"
                            ).fetchone() == (0,)
    migrate.upgrade(url, output=io.StringIO())
    with shardq.Client(url) as client:
        client.enqueue("q", {})
        assert client.stats("q")["available"] == 1


def test_a_schema_dropped_by_hand_is_created_again(databases: Any) -> None:
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA shardq CASCADE")  # the version table, in public, stays
    migrate.upgrade(url, output=io.StringIO())
    assert "shardq.tasks" in tables(url)
    assert migrate.current(url) == HEAD
    with shardq.Client(url) as client:
        client.enqueue("q", {})
        assert client.stats("q")["available"] == 1


def test_each_revision_is_rerunnable(databases: Any) -> None:
    """Every DDL tolerates having already run (a schema change that committed before
    its version row did, as can happen on CockroachDB)."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM shardq_alembic_version")
    migrate.upgrade(url, output=io.StringIO())
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version_num FROM shardq_alembic_version").fetchone() == (
            HEAD,)


@pytest.mark.parametrize("buckets", [1, 4, 64])
def test_bucket_count_is_chosen_at_creation(databases: Any, buckets: int) -> None:
    url = databases.create(bucket_count=buckets)
    with shardq.Client(url) as client:
        assert client.bucket_count == buckets
        ids = client.enqueue_many("q", [{}] * 500)
        got = {t.bucket for t in client.claim("q", limit=500)}
        assert got <= set(range(buckets))
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT id, bucket FROM shardq.tasks").fetchall()
        assert {i: int.from_bytes(i.bytes[14:16], "big") % buckets for i in ids} == dict(rows)


def test_missing_schema_is_reported(databases: Any) -> None:
    url = databases.create(migrated=False)
    with pytest.raises(shardq.SchemaNotReady, match="shardq migrate"):
        shardq.Client(url)


def test_alembic_command_line_from_the_checkout(databases: Any) -> None:
    url = databases.create(migrated=False)
    env = {**os.environ, "SHARDQ_DSN": url}
    alembic = [sys.executable, "-m", "alembic"]
    subprocess.run([*alembic, "upgrade", "head"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    assert "shardq.tasks" in tables(url)
    subprocess.run([*alembic, "downgrade", "base"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    assert tables(url) == set()  # "removes everything shardq made" (docs/how-to/schema.md)
    other = databases.create(migrated=False)
    subprocess.run([*alembic, "-x", f"dsn={other}", "-x", "buckets=8", "upgrade", "head"],
                   cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "SHARDQ_DSN"},
                   check=True, capture_output=True)
    with shardq.Client(other) as client:
        assert client.bucket_count == 8


def test_sql_rendering_prints_the_ddl() -> None:
    out = io.StringIO()
    migrate.upgrade(None, sql=True, dialect="postgresql", bucket_count=16, output=out)
    text = out.getvalue()
    assert "CREATE TABLE IF NOT EXISTS shardq.tasks" in text
    assert "GENERATED ALWAYS AS" in text
    assert "fillfactor = 90" in text


def test_a_failover_pair_and_key_value_settings_migrate(databases: Any) -> None:
    """libpq reads the DSN itself: a list of hosts (the first one down, as a failed
    primary is) and ``key=value`` settings migrate like a plain URL."""
    url = databases.create(migrated=False)
    params = conninfo_to_dict(url)
    host, port = str(params.get("host") or "localhost"), str(params.get("port") or "5432")
    down = "/nonexistent-shardq" if host.startswith("/") else "127.0.0.1"
    pair = make_conninfo(url, host=f"{down},{host}", port=f"{free_port()},{port}")
    with open(os.devnull, "w") as sink:
        migrate.upgrade(pair, output=sink)
    assert migrate.current(pair) == migrate.head()
    if not host.startswith("/"):  # the URL form names hosts in its authority
        user = params.get("user", "postgres")
        netloc = f"{user}@127.0.0.1:{free_port()},{host}:{port}"
        assert migrate.current(f"postgresql://{netloc}/{params['dbname']}"
                               "?target_session_attrs=read-write") == migrate.head()
