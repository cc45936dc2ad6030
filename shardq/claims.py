"""Claiming: one bounded, index-ordered ``UPDATE … SKIP LOCKED … RETURNING`` on one bucket."""

from __future__ import annotations

from uuid import uuid4

from psycopg.errors import UniqueViolation
from psycopg.rows import args_row

from shardq import validate
from shardq.db import Conn
from shardq.statements import Statements
from shardq.task import Task

# Claims return Task's fields in their declared order: positional construction, no dict.
TASK_ROW = args_row(Task)


def claim_bucket(st: Statements, queue: str, bucket: int, *, limit: int,
                 lease_s: float | None) -> list[Task]:
    """Claim up to ``limit`` eligible tasks of ``queue`` from one bucket (one statement)."""
    validate.queue_name(queue)
    validate.claim(bucket, st.bucket_count, limit, lease_s)
    lease = lease_s if lease_s is not None else st.config.lease_s
    query = st.query("claim", limit)
    # One lease token for the whole claim, made here: a claim whose reply was lost
    # after the server committed finds what it took by it (claim_recover).
    params = st.params(queue=queue, bucket=bucket, lease_s=lease, token=uuid4())
    tries = 0

    def work(c: Conn) -> list[Task]:
        nonlocal tries
        tries += 1
        cursor = c.cursor(row_factory=TASK_ROW)
        if tries > 1:
            taken = cursor.execute(st.query("claim_recover"), params).fetchall()
            if taken:
                return taken
        try:
            return cursor.execute(query, params).fetchall()
        except UniqueViolation:
            # Two claims raced for two tasks of one key; tasks_running_keys let one
            # win.  This bucket is simply tried again later.
            return []

    return st.run(work)
