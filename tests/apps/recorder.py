"""A test app whose handlers record every run in the table ``runs`` of SHARDQ_DSN's database."""

from __future__ import annotations

import asyncio
import os
import time

import psycopg

import shardq

app = shardq.App()

SETUP = """
CREATE TABLE IF NOT EXISTS runs (
    task_id uuid NOT NULL, n int NOT NULL, attempt int NOT NULL, pid int NOT NULL,
    started_at timestamptz NOT NULL, ended_at timestamptz, outcome text
)"""


def _record(n: int, started: float, outcome: str) -> None:
    context = shardq.current()
    with psycopg.connect(os.environ["SHARDQ_DSN"], autocommit=True) as conn:
        conn.execute(
            "INSERT INTO runs VALUES (%s, %s, %s, %s, to_timestamp(%s), clock_timestamp(), %s)",
            (context.task.id, n, context.task.attempts, os.getpid(), started, outcome))


@app.task(queue="work")
def record(n: int) -> None:
    _record(n, time.time(), "ok")


@app.task(queue="work")
async def arecord(n: int) -> None:
    started = time.time()
    await asyncio.sleep(0.001)
    _record(n, started, "ok")


@app.task(queue="flaky", max_attempts=3)
def flaky(n: int) -> None:
    _record(n, time.time(), "raised")
    raise RuntimeError(f"flaky {n} failed")


@app.task(queue="flaky")
def retry_later(n: int) -> None:
    _record(n, time.time(), "retry")
    raise shardq.Retry(in_s=3600)


@app.task(queue="flaky")
def poison(n: int) -> None:
    _record(n, time.time(), "fail")
    raise shardq.Fail("poison message")


def _run_for(n: int, seconds: float) -> None:
    """Work for ``seconds``, stopping early (and recording so) if the run is cancelled."""
    started = time.time()
    while time.time() - started < seconds:
        if shardq.current().cancelled:
            _record(n, started, "cancelled")
            return
        time.sleep(0.05)
    _record(n, started, "ok")


@app.task(queue="slow", lease_s=2)
def slow(n: int, seconds: float) -> None:
    _run_for(n, seconds)


@app.task(queue="patient", lease_s=6)
def patient(n: int, seconds: float) -> None:
    """Like ``slow``, with a lease that a loaded machine does not let lapse."""
    _run_for(n, seconds)
