"""The raw handler chaos daemons run (``shardq consume tests.chaos.app:handle --queue chaos``).

Each run is logged to ``chaos_runs`` (public schema, outside shardq's) over its own
connection to ``CHAOS_LOG_DSN``: a database on a second server, reached directly, never
through the fault proxy, so the log survives the faults it is there to measure and a
handler still finishes while shardq's server is down.  A log write is retried until it
lands and is idempotent by its run id, so a retried write is never a second run.

Payloads: ``{"n": int, "sleep_s": float}``; with ``"exit": true`` the handler logs
the run and ends its process with ``os._exit(1)`` (a poison task).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

import psycopg

import shardq

QUEUE = "chaos"
LOG_RETRY_S = 180.0

SETUP = """
CREATE TABLE IF NOT EXISTS public.chaos_runs (
    run_id uuid PRIMARY KEY,
    task_id uuid NOT NULL,
    n int NOT NULL,
    pid int NOT NULL,
    attempt int NOT NULL,
    outcome text NOT NULL,
    logged_at timestamptz NOT NULL DEFAULT clock_timestamp()
)"""

_local = threading.local()


def _log(n: int, outcome: str) -> None:
    task = shardq.current().task
    record(os.environ["CHAOS_LOG_DSN"],
           "INSERT INTO public.chaos_runs (run_id, task_id, n, pid, attempt, outcome) "
           "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING",
           (uuid.uuid4(), task.id, n, os.getpid(), task.attempts, outcome))


def record(dsn: str, query: str, row: tuple[object, ...]) -> None:
    """Run ``query`` with ``row`` on ``dsn``, over the handler thread's own connection,
    again until it lands (up to LOG_RETRY_S): the query must be idempotent (by a run id)."""
    deadline = time.monotonic() + LOG_RETRY_S
    while True:
        try:
            conn = getattr(_local, "conn", None)
            if conn is None or conn.closed:
                conn = _local.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5)
            conn.execute(query, row)
            return
        except psycopg.OperationalError:
            _local.conn = None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def handle(payload: dict[str, Any]) -> None:
    """Run one chaos task: sleep, then log; or log and exit the process."""
    n = int(payload["n"])
    if payload.get("exit"):
        _log(n, "exit")
        os._exit(1)
    time.sleep(float(payload.get("sleep_s", 0.0)))
    _log(n, "ok")
