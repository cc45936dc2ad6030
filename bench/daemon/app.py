"""The app the daemon benchmarks run: a no-op task and one that logs its pickup latency."""

from __future__ import annotations

import os
import time

import psycopg

import shardq

app = shardq.App()

PICKUP_TABLE = """
CREATE TABLE IF NOT EXISTS bench_pickup (
    enqueued_at float8 NOT NULL, started_at float8 NOT NULL, mode text NOT NULL
)"""


@app.task(queue="drain")
def noop(n: int) -> None:
    """Does nothing: the drain benchmark measures the queue, not the work."""


@app.task(queue="pickup")
def picked(enqueued_at: float, mode: str) -> None:
    """Records when it started against when it was enqueued (same machine clock)."""
    started = time.time()
    with psycopg.connect(os.environ["SHARDQ_DSN"], autocommit=True) as conn:
        conn.execute("INSERT INTO bench_pickup VALUES (%s, %s, %s)", (enqueued_at, started, mode))
