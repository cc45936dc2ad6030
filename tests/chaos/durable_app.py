"""The app of the durable tasks' chaos test (``shardq consume tests.chaos.durable_app:app``):
a journey of steps, a sleep, an event, and children awaited.

Each run of a step's function, and each run of a child, inserts a row of its own (a
fresh run id, the task, what ran) into ``durable_runs`` of ``DURABLE_LOG_DSN``'s
database, straight to the server, never through the fault proxy: the rows count the
runs, which shardq has no way to merge (see :func:`tests.chaos.app.record`).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import shardq
from tests.chaos.app import record

QUEUE = "journeys"
KIDS = 3

SETUP = """
CREATE TABLE IF NOT EXISTS public.durable_runs (
    run_id uuid PRIMARY KEY,
    task_id uuid NOT NULL,
    what text NOT NULL,
    pid int NOT NULL
)"""

app = shardq.App()


def ran(what: str, value: Any, work_s: float = 0.0) -> Any:
    """A step's function: works ``work_s``, records this run, returns ``value``."""
    time.sleep(work_s)
    record(os.environ["DURABLE_LOG_DSN"],
           "INSERT INTO public.durable_runs (run_id, task_id, what, pid) "
           "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING",
           (uuid.uuid4(), shardq.current().task.id, what, os.getpid()))
    return value


@app.task(queue=QUEUE, keep_result_s=3600)
def kid(i: int, j: int) -> int:
    """A child: records its run, returns its number."""
    return int(ran(f"kid {i}.{j}", j))


@app.task(queue=QUEUE, keep_result_s=3600)
def journey(i: int, work_s: float) -> list[Any]:
    """Charge, sleep, wait for approval, fan out to children, then ship."""
    ctx = shardq.current()
    charged = ctx.step("charge", ran, f"charge {i}", i, work_s)
    ctx.sleep("cool-off", 0.2)
    approval = ctx.wait_event("approval", f"approve-{i}", timeout_s=300)
    kids = [ctx.spawn(f"kid-{j}", kid.s(i, j)) for j in range(KIDS)]
    got = ctx.wait("kids", kids, timeout_s=300)
    shipped = ctx.step("ship", ran, f"ship {i}", i * 10, work_s)
    return [charged, approval, got, shipped]
