"""Reading tasks back: one task's record, or a queue's tasks in one state (a queue's
figures are :mod:`shardq.ops.queuestats`).  Each read is a
:class:`~shardq.core.plan.Plan` whose arguments are checked when it is made."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from shardq.core import validate
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import Step, TaskInfo, Waiting
from shardq.ops import attempts
from shardq.ops.durable import NEVER

# How many times a record is read again while its row keeps changing under the reads.
READS = 8


def get(st: Statements, task_id: UUID | str) -> Plan[TaskInfo | None]:
    """Everything stored about one task, its attempts (and a durable task's checkpoints)
    included, or None if it is gone (finished or purged;
    :func:`shardq.ops.attempts.attempts` still reads its attempts).

    Where the id names its bucket (PostgreSQL) the lookup stays in that bucket.

    The row, the attempts and the steps are three statements, each with a snapshot of
    its own, so the row is read once more after them: every statement that writes an
    attempt changes the row too (a claim, a settle, a rescue), so a row read the same
    before and after shows the attempts of that same moment.  A row that changed is
    read with its attempts again, :data:`READS` times at most (after that the record
    is the last row read, with the attempts read just before it).
    """
    tid = validate.task_id(task_id)
    values = {"id": tid, "bucket": st.dialect.bucket_of(tid, st.bucket_count)}

    def steps() -> Steps[TaskInfo | None]:
        rows = yield st.fetch("get", values, row_factory=dict_row)
        for _ in range(READS):
            if not rows:
                return None
            history = attempts.read((yield st.fetch("attempts_list", {"id": tid})))
            # Only a task that checkpointed a call has steps to read (tasks.durable).
            steps = [Step(*r) for r in (yield st.fetch("steps_list", {"id": tid}))] \
                if rows[0]["durable"] else []
            again = yield st.fetch("get", values, row_factory=dict_row)
            if again == rows:
                break
            rows = again
        if not rows:
            return None
        return dataclasses.replace(info(rows[0]), history=tuple(history), steps=tuple(steps))

    return plan(steps)


def tasks(st: Statements, queue: str, status: str, limit: int, *, newest: bool = False,
          after: datetime | None = None, before: datetime | None = None
          ) -> Plan[list[TaskInfo]]:
    """Up to ``limit`` tasks of ``queue`` in ``status`` ('available', 'locked' or 'dead')
    whose exec_time lies in (``after``, ``before``], earliest first (latest first with
    ``newest``).  One bounded range scan per bucket: the cost does not grow with the queue.
    """
    query = st.query("tasks_list", fragments={"order": "order_latest"} if newest else None)
    values = {"queue": validate.queue_name(queue), "status": status, "limit": limit,
              "after": after, "before": before, "bucket_count": st.bucket_count}

    def steps() -> Steps[list[TaskInfo]]:
        rows = yield st.fetch(query, values, row_factory=dict_row)
        return [info(row) for row in rows]

    return plan(steps)


def info(row: dict[str, Any]) -> TaskInfo:
    """A task's record from its row.  A row that is not locked may still carry the token
    of the claim that settled it (which lets a retried settle recognise its own work);
    no lease is held, so the record shows none.  A parked task's wake-up time is its
    wait's deadline, unless it is :data:`~shardq.ops.durable.NEVER` (no deadline)."""
    row = dict(row)
    parked, event = row.pop("parked"), row.pop("wait_event")
    del row["durable"]
    if row["status"] != "locked":
        row["lease_token"] = None
    if parked is not None:
        until = None if row["exec_time"] >= NEVER else row["exec_time"]
        row["waiting_for"] = Waiting(parked, event, until)
    return TaskInfo(**row)
