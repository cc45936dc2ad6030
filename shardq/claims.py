"""Claiming: one bounded, index-ordered ``UPDATE … SKIP LOCKED … RETURNING`` on one bucket."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from json import loads
from typing import Any
from uuid import UUID, uuid4

from psycopg.errors import UniqueViolation
from psycopg.rows import RowFactory, RowMaker

from shardq import validate
from shardq.db import Conn
from shardq.statements import Statements
from shardq.task import Task

# The fields of Task a claim returns, in their declared order.  The queue and the lease
# token are the claim's own parameters, so they are not read back: decoding a uuid per
# row was a measurable share of a worker's time.
GIVEN = ("queue", "lease_token")
RETURNED = tuple(f.name for f in fields(Task) if f.name not in GIVEN)


def task_rows(queue: str, token: UUID) -> RowFactory[Task]:
    """Rows of a claim (:data:`RETURNED`, the payload as JSON text) as Tasks of ``queue``
    under lease ``token``."""
    def factory(cursor: Any) -> RowMaker[Task]:
        def make(values: Sequence[Any]) -> Task:
            task_id, bucket, exec_time, payload, *rest = values
            return Task(task_id, queue, bucket, exec_time, token, loads(payload), *rest)
        return make
    return factory


def claim_bucket(st: Statements, queue: str, bucket: int, *, limit: int,
                 lease_s: float | None) -> list[Task]:
    """Claim up to ``limit`` eligible tasks of ``queue`` from one bucket (one statement)."""
    validate.queue_name(queue)
    validate.claim(bucket, st.bucket_count, limit, lease_s)
    lease = lease_s if lease_s is not None else st.config.lease_s
    query = st.query("claim", limit)
    # One lease token for the whole claim, made here: a claim whose reply was lost
    # after the server committed finds what it took by it (claim_recover).
    token = uuid4()
    params = st.params(queue=queue, bucket=bucket, lease_s=lease, token=token)
    rows = task_rows(queue, token)
    tries = 0

    def work(c: Conn) -> list[Task]:
        nonlocal tries
        tries += 1
        cursor = c.cursor(row_factory=rows)
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
