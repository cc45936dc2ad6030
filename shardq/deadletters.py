"""Dead letters: list, retry and purge tasks that used up their attempts (or were failed)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from psycopg.rows import dict_row

from shardq import validate
from shardq.db import Conn
from shardq.errors import InvalidTask
from shardq.task import TaskInfo

if TYPE_CHECKING:
    from shardq.client import Client

MAX_LIST = 10_000


def bucket_of(task_id: UUID, bucket_count: int) -> int:
    """The PostgreSQL bucket of an id: its last two bytes, big-endian, modulo the count."""
    return int.from_bytes(task_id.bytes[14:16], "big") % bucket_count


def _buckets(client: Client, ids: list[UUID] | None) -> list[int]:
    n = client.bucket_count
    if ids is None or client.dialect != "postgresql":  # CockroachDB hashes the whole key
        return list(range(n))
    return sorted({bucket_of(i, n) for i in ids})


def listing(client: Client, queue: str, limit: int) -> list[TaskInfo]:
    """The newest ``limit`` dead tasks of ``queue``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
        raise InvalidTask(f"limit must be an integer in [1, {MAX_LIST}], got {limit!r}")
    params = client._params(queue=validate.queue_name(queue), limit=limit,
                            bucket_count=client.bucket_count)
    query = client._query("dead_list")

    def work(c: Conn) -> list[TaskInfo]:
        rows = c.cursor(row_factory=dict_row).execute(query, params).fetchall()
        return [TaskInfo(**row) for row in rows]

    return client.db.run(work)


def retry(client: Client, ids: Iterable[UUID | str] | None, queue: str | None) -> list[UUID]:
    """Make dead tasks available again (by id, or every one of a queue); returns their ids."""
    if (ids is None) == (queue is None):
        raise InvalidTask("give the ids of dead tasks or a queue, not both")
    wanted = None if ids is None else [UUID(str(i)) for i in ids]
    params: dict[str, Any] = client._params(
        ids=wanted, queue=None if queue is None else validate.queue_name(queue),
        buckets=_buckets(client, wanted))
    return _run_ids(client, "dead_retry", params)


def purge(client: Client, queue: str, older_than_s: float) -> int:
    """Delete ``queue``'s tasks dead for longer than ``older_than_s``; returns how many."""
    params = client._params(queue=validate.queue_name(queue), buckets=_buckets(client, None),
                            older_than_s=validate.seconds("older_than_s", older_than_s))
    return len(_run_ids(client, "dead_purge", params))


def _run_ids(client: Client, name: str, params: dict[str, Any]) -> list[UUID]:
    query = client._query(name)

    def work(c: Conn) -> list[UUID]:
        return [row[0] for row in c.execute(query, params).fetchall()]

    return client.db.run(work)
