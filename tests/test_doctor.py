"""``shardq doctor`` against real databases: what it sees, and the advice it gives."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

import shardq
from shardq.cli import doctor
from shardq.worker.config import WorkerConfig
from tests.conftest import Databases
from tests.helpers import live_rows_counted

pytestmark = pytest.mark.server

CHECKS = ["pooler", "server version", "autovacuum", "index bloat", "janitor vacuum", "pool size",
          "LISTEN/NOTIFY", "limits"]


def findings(url: str, worker: WorkerConfig | None = None) -> dict[str, doctor.Finding]:
    with shardq.Client(url) as client:
        return {f.check: f for f in doctor.examine(client, worker or WorkerConfig())}


def test_a_fresh_schema_passes_what_it_controls(databases: Databases) -> None:
    seen = findings(databases.create())
    assert list(seen) == CHECKS
    for name in ("pooler", "server version", "index bloat", "janitor vacuum", "pool size",
                 "LISTEN/NOTIFY", "limits"):
        assert seen[name].ok, seen[name]
        assert seen[name].advice == ""
    assert seen["server version"].seen.startswith("PostgreSQL ")
    assert "NOTIFY arrived" in seen["LISTEN/NOTIFY"].seen


def test_advice_for_vacuum_off_and_too_many_connections(databases: Databases) -> None:
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE shardq.tasks SET (autovacuum_enabled = false)")
    seen = findings(url, WorkerConfig(processes=256, claimers=64))
    vacuum = seen["autovacuum"]
    assert not vacuum.ok
    # The server's switch is checked first, then the table's.
    assert ("autovacuum = on" in vacuum.advice
            or vacuum.advice == "ALTER TABLE shardq.tasks RESET (autovacuum_enabled)")
    pool = seen["pool size"]
    assert not pool.ok
    assert "--processes 256" in pool.seen
    assert "raise max_connections" in pool.advice


def test_a_bloated_index_is_named(databases: Databases) -> None:
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE shardq.tasks SET (autovacuum_enabled = false)")
        conn.execute("INSERT INTO shardq.tasks (queue, payload) "
                     "SELECT 'bloat', '{}' FROM generate_series(1, 300000)")
        # Acked tasks leave their index entries' pages behind: a VACUUM frees them for
        # reuse, but the index keeps its size.
        conn.execute("DELETE FROM shardq.tasks WHERE random() < 0.99")
        conn.execute("VACUUM ANALYZE shardq.tasks")
        live_rows_counted(conn, 30_000)
    bloat = findings(url)["index bloat"]
    assert not bloat.ok
    assert "tasks_pkey" in bloat.seen
    assert bloat.advice.startswith("REINDEX INDEX CONCURRENTLY")


def test_cli_prints_each_check_and_exits_1_on_advice(databases: Databases) -> None:
    url = databases.create()
    run = subprocess.run([sys.executable, "-m", "shardq", "doctor", "--dsn", url,
                          "--processes", "256", "--claimers", "64"], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    assert [line.split(":")[0][6:] for line in lines if not line.startswith(" ")] == CHECKS
    assert any(line.startswith("WARN  pool size:") for line in lines)
    assert any(line.strip().startswith("advice: only") for line in lines)
