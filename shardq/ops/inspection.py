"""Reading tasks back: one task's record (a queue's figures are :mod:`shardq.ops.queuestats`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from shardq.core import validate
from shardq.core.statements import Statements
from shardq.core.task import TaskInfo


def get(st: Statements, task_id: UUID | str) -> TaskInfo | None:
    """Everything stored about one task, or None if it is gone (finished or purged).

    Where the id names its bucket (PostgreSQL) the lookup stays in that bucket.
    """
    tid = validate.task_id(task_id)
    bucket = st.dialect.bucket_of(tid, st.bucket_count)
    row = st.one("get", {"id": tid, "bucket": bucket}, row_factory=dict_row)
    return info(row) if row else None


def tasks(st: Statements, queue: str, status: str, limit: int, *, newest: bool = False,
          after: datetime | None = None, before: datetime | None = None) -> list[TaskInfo]:
    """Up to ``limit`` tasks of ``queue`` in ``status`` ('available', 'locked' or 'dead')
    whose exec_time lies in (``after``, ``before``], earliest first (latest first with
    ``newest``).  One bounded range scan per bucket: the cost does not grow with the queue.
    """
    query = st.query("tasks_list", fragments={"order": "order_latest"} if newest else None)
    rows = st.all(query, {
        "queue": validate.queue_name(queue), "status": status, "limit": limit,
        "after": after, "before": before, "bucket_count": st.bucket_count},
        row_factory=dict_row)
    return [info(row) for row in rows]


def info(row: dict[str, Any]) -> TaskInfo:
    """A task's record from its row.  A row that is not locked may still carry the token
    of the claim that settled it (which lets a retried settle recognise its own work);
    no lease is held, so the record shows none."""
    if row["status"] != "locked":
        row = {**row, "lease_token": None}
    return TaskInfo(**row)
