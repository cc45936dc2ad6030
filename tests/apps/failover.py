"""A test app for failovers: every run is logged outside the cluster that fails over.

Each run inserts a row into ``failover_runs`` of ``FAILOVER_LOG_DSN``'s database, a
server the failover does not touch, over a connection of the handler thread's own (a
write retried until it lands, idempotent by its run id, so a retried write is never a
second run: :func:`tests.chaos.app.record`).  Counting runs there cannot lose a record
with the old primary.

- ``work(n)`` on queue ``failover``: logs the run;
- ``capped(n)`` on queue ``failover_capped`` (the test sets its ``max_running``): works
  50 ms, then logs;
- ``failover_tick`` every second on queue ``failover_ticks``: logs its slot.
"""

from __future__ import annotations

import os
import time
import uuid

import shardq
from tests.chaos.app import record

app = shardq.App()

QUEUE, CAPPED, TICKS = "failover", "failover_capped", "failover_ticks"

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

def _log(n: int, slot: str | None = None) -> None:
    task = shardq.current().task
    record(os.environ["FAILOVER_LOG_DSN"],
           "INSERT INTO failover_runs VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
           "ON CONFLICT (run_id) DO NOTHING",
           (uuid.uuid4(), task.id, task.queue, n, slot, task.attempts, os.getpid(), time.time(),
            task.enqueued_at.timestamp()))


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
