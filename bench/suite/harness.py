"""Running systems side by side: runner processes, fresh databases, database counters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench import common

ROOT = Path(__file__).resolve().parents[2]
SETTLE_S = 1.2  # backends flush their stats on exit and at most once a second
SYSTEMS = ("shardq", "pgqueuer", "procrastinate")


class RunnerError(RuntimeError):
    """A runner process failed."""


def spawn(spec: dict[str, Any]) -> subprocess.Popen[str]:
    """Start a runner process for ``spec`` (see :mod:`bench.suite.runner`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SHARDQ_DSN", None)
    return subprocess.Popen(
        [sys.executable, "-m", "bench.suite.runner", json.dumps(spec)], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_ready(proc: subprocess.Popen[str], timeout: float = 120.0) -> None:
    """Block until a consumer printed READY (it is constructed and about to start)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            raise RunnerError(f"runner exited before READY: {err[-3000:]}")
        if line.strip() == "READY":
            return
    raise RunnerError("runner never became ready")


def finish(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """Wait for a runner and return its RESULT (raises RunnerError on failure)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RunnerError(f"runner timed out after {timeout:.0f} s: {err[-2000:]}") from None
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT "):]))
    raise RunnerError(f"runner failed (exit {proc.returncode}): {err[-3000:]}")


def call(spec: dict[str, Any], timeout: float = 3600.0) -> dict[str, Any]:
    """Run one runner to completion and return its RESULT."""
    return finish(spawn(spec), timeout)


@contextmanager
def fresh_server(dsn: str | None, max_connections: int | None = None
                 ) -> Iterator[tuple[str, str, common.Databases]]:
    """A fresh PostgreSQL (embedded unless ``dsn``) and a Databases helper on it."""
    with (common.server(dsn, max_connections) as (admin, description),
          common.Databases(admin, "sq_suite") as dbs):
        yield admin, description, dbs


def prepare(dbs: common.Databases, system: str, buckets: int = 16) -> str:
    """A fresh database with ``system``'s schema installed; its URL."""
    if system == "shardq" or system == "ceiling":
        return dbs.migrated(buckets)
    url = dbs.create()
    call({"system": system, "mode": "setup", "url": url}, timeout=300)
    return url


@dataclass
class Counters:
    """Database-level counters at one moment: committed+rolled back transactions, WAL LSN."""

    xacts: int
    wal_lsn: str


def counters(url: str) -> Counters:
    """Read this database's transaction count and the server's WAL position."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback, pg_current_wal_lsn()::text "
            "FROM pg_stat_database WHERE datname = current_database()").fetchone()
    assert row is not None
    return Counters(int(row[0]), str(row[1]))


def counter_delta(url: str, before: Counters) -> tuple[int, int]:
    """(transactions, WAL bytes) since ``before`` (waits ``SETTLE_S`` for stats to flush)."""
    time.sleep(SETTLE_S)
    after = counters(url)
    with psycopg.connect(url, autocommit=True) as conn:
        wal = int(common.scalar(conn, "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)",
                                (after.wal_lsn, before.wal_lsn)))
    return after.xacts - before.xacts - 2, wal  # minus our own two reads


def table_stats(url: str) -> dict[str, Any]:
    """Sizes and dead tuples of the user tables of database ``url`` (after stats settle)."""
    time.sleep(SETTLE_S)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT schemaname || '.' || relname, pg_table_size(relid), pg_indexes_size(relid), "
            "n_live_tup, n_dead_tup, autovacuum_count + vacuum_count "
            "FROM pg_stat_user_tables ORDER BY pg_total_relation_size(relid) DESC").fetchall()
    tables = [{"table": r[0], "table_bytes": int(r[1]), "index_bytes": int(r[2]),
               "live": int(r[3]), "dead": int(r[4]), "vacuums": int(r[5])} for r in rows]
    return {
        "tables": tables,
        "table_bytes": sum(t["table_bytes"] for t in tables),
        "index_bytes": sum(t["index_bytes"] for t in tables),
        "dead": sum(t["dead"] for t in tables),
        "live": sum(t["live"] for t in tables),
    }


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
