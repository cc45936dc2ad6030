"""A test app for flow control: every run of its handlers is recorded, start and end,
by an observer that owes nothing to shardq's own rows.

A handler inserts its start into the table ``limited_runs`` of ``LIMITED_LOG_DSN``'s
database (by default ``SHARDQ_DSN``'s) through a connection of its own, in
autocommit, then works (sleeps) for the seconds it is given, then sets its end.  The
times are the handler's own clock readings (every process runs on one machine): the
interval [started_at, ended_at] holds the work and lies within the task's claim and
its ack, so it is the part of a run that a limit must keep apart.  A handler killed
mid-run leaves its row with no end.

One queue per limit, whose limits each test sets (``shardq.queues``):

- ``capped``: for ``max_running``;
- ``grouped``: for ``max_running_per_group`` (tasks enqueued with ``group=``, which a
  handler cannot read: its group is passed as an argument too);
- ``rated``: for ``rate``;
- ``leased``: ``max_running`` under a 3 s lease, for a worker killed mid-run.
"""

from __future__ import annotations

import os
import time

import psycopg

import shardq

app = shardq.App()

SETUP = """
CREATE TABLE IF NOT EXISTS limited_runs (
    task_id uuid NOT NULL, queue text NOT NULL, n int NOT NULL, grp text,
    attempt int NOT NULL, claims int, pid int NOT NULL,
    started_at timestamptz NOT NULL, ended_at timestamptz
)"""


def _work(queue: str, n: int, seconds: float, group: str | None) -> None:
    """Record the run's start, work for ``seconds``, record its end."""
    started = time.time()
    task = shardq.current().task
    dsn = os.environ.get("LIMITED_LOG_DSN") or os.environ["SHARDQ_DSN"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        # How often the task was claimed, this claim included: a claim recovered after a
        # lost reply is one claim, a task put back after a lease ran out is claimed again.
        conn.execute("INSERT INTO limited_runs VALUES (%s, %s, %s, %s, %s, "
                     "(SELECT times_claimed FROM shardq.tasks WHERE id = %s), %s, "
                     "to_timestamp(%s), NULL)",
                     (task.id, queue, n, group, task.attempts, task.id, os.getpid(), started))
        time.sleep(seconds)
        conn.execute("UPDATE limited_runs SET ended_at = to_timestamp(%s) "
                     "WHERE task_id = %s AND attempt = %s AND pid = %s",
                     (time.time(), task.id, task.attempts, os.getpid()))


@app.task(queue="capped")
def capped(n: int, seconds: float) -> None:
    """A run of ``seconds`` under the queue's ``max_running``."""
    _work("capped", n, seconds, None)


@app.task(queue="grouped")
def grouped(n: int, seconds: float, group: str) -> None:
    """A run of ``seconds`` of the task's ``group`` under ``max_running_per_group``."""
    _work("grouped", n, seconds, group)


@app.task(queue="rated")
def rated(n: int, seconds: float) -> None:
    """A run of ``seconds`` under the queue's ``rate``."""
    _work("rated", n, seconds, None)


@app.task(queue="leased", lease_s=3)
def leased(n: int, seconds: float) -> None:
    """A run of ``seconds`` under ``max_running`` and a 3 s lease."""
    _work("leased", n, seconds, None)

