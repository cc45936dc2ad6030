"""The app of the flows' chaos test (``shardq consume tests.chaos.flow_app:app``): a chord
whose members return their index and whose callback records each of its runs.

A run of the callback inserts a row of its own (a fresh run id, the pid, the results it
was given) into ``chord_runs`` of ``CHORD_LOG_DSN``'s database, straight to the server,
never through the fault proxy: the count of rows is the count of the callback's runs,
which shardq has no way to merge.  The write is retried until it lands and is
idempotent by its run id (:func:`tests.chaos.app.record`), so a retried write is never
a second run.
"""

from __future__ import annotations

import os
import time
import uuid

from psycopg.types.json import Jsonb

import shardq
from tests.chaos.app import record

QUEUE = "chord"

SETUP = """
CREATE TABLE IF NOT EXISTS public.chord_runs (
    run_id uuid PRIMARY KEY,
    task_id uuid NOT NULL,
    pid int NOT NULL,
    results jsonb NOT NULL,
    logged_at timestamptz NOT NULL DEFAULT clock_timestamp()
)"""

app = shardq.App()


@app.task(queue=QUEUE)
def member(index: int, sleep_s: float) -> int:
    """A member of the chord: works ``sleep_s``, returns its index."""
    time.sleep(sleep_s)
    return index


@app.task(queue=QUEUE)
def gather(results: list[int]) -> int:
    """The chord's callback: records this run and the results it took."""
    record(os.environ["CHORD_LOG_DSN"],
           "INSERT INTO public.chord_runs (run_id, task_id, pid, results) "
           "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING",
           (uuid.uuid4(), shardq.current().task.id, os.getpid(), Jsonb(results)))
    return len(results)
