"""A test app with one periodic task every 2 s that records each run in the table ``ticks``.

``missed="all"``: should every daemon stall past a slot (a loaded test machine), the
slot still runs, late, and the test's count stays exact.
"""

from __future__ import annotations

import os

import psycopg

import shardq

app = shardq.App()

SETUP = """
CREATE TABLE IF NOT EXISTS ticks (
    slot timestamptz NOT NULL, task_id uuid NOT NULL, pid int NOT NULL,
    ran_at timestamptz NOT NULL DEFAULT clock_timestamp()
)"""


@app.periodic(every_s=2, queue="ticks", name="tick", missed="all")
def tick() -> None:
    task = shardq.current().task
    with psycopg.connect(os.environ["SHARDQ_DSN"], autocommit=True) as conn:
        conn.execute("INSERT INTO ticks (slot, task_id, pid) VALUES (%s, %s, %s)",
                     (task.payload["slot"], task.id, os.getpid()))
