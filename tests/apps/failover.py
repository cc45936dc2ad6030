"""A test app for failovers: every run is logged outside the cluster that fails over.

Each run inserts a row into ``failover_runs`` of ``FAILOVER_LOG_DSN``'s database, a
server the failover does not touch, over a connection of the handler thread's own (a
write retried until it lands, idempotent by its run id, so a retried write is never a
second run).  Counting runs there cannot lose a record with the old primary.

- ``work(n)`` on queue ``failover``: logs the run;
- ``capped(n)`` on queue ``failover_capped`` (the test sets its ``max_running``): works
  50 ms, then logs;
- ``failover_tick`` every second on queue ``failover_ticks``: logs its slot.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import psycopg

import shardq

app = shardq.App()

QUEUE, CAPPED, TICKS = "failover", "failover_capped", "failover_ticks"
LOG_RETRY_S = 120.0

SETUP = """
CREATE TABLE IF NOT EXISTS failover_runs (
    run_id uuid PRIMARY KEY,
    task_id uuid NOT NULL,
    queue text NOT NULL,
    n int NOT NULL,
    slot text,
    attempt int NOT NULL,
    pid int NOT NULL,
    at float8 NOT NULL,
    enqueued_at float8 NOT NULL
)"""

_local = threading.local()


def _log(n: int, slot: str | None = None) -> None:
    task = shardq.current().task
    row = (uuid.uuid4(), task.id, task.queue, n, slot, task.attempts, os.getpid(), time.time(),
           task.enqueued_at.timestamp())
    deadline = time.monotonic() + LOG_RETRY_S
    while True:
        try:
            conn = getattr(_local, "conn", None)
            if conn is None or conn.closed:
                conn = _local.conn = psycopg.connect(os.environ["FAILOVER_LOG_DSN"],
                                                     autocommit=True, connect_timeout=5)
            conn.execute("INSERT INTO failover_runs VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                         "ON CONFLICT (run_id) DO NOTHING", row)
            return
        except psycopg.OperationalError:
            _local.conn = None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@app.task(queue=QUEUE)
def work(n: int) -> None:
    _log(n)


@app.task(queue=CAPPED)
def capped(n: int) -> None:
    time.sleep(0.05)
    _log(n)


@app.periodic(every_s=1, queue=TICKS, name="failover_tick", missed="all")
def tick() -> None:
    _log(-1, str(shardq.current().task.payload["slot"]))
