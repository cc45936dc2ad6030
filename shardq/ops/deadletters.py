"""Dead letters: list, retry and purge tasks that used up their attempts (or were failed)."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.statements import Statements
from shardq.core.task import TaskInfo
from shardq.ops import inspection

MAX_LIST = 10_000


def listing(st: Statements, queue: str, limit: int) -> list[TaskInfo]:
    """The newest ``limit`` dead tasks of ``queue``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
        raise InvalidTask(f"limit must be an integer in [1, {MAX_LIST}], got {limit!r}")
    return inspection.tasks(st, queue, "dead", limit, newest=True)


def retry(st: Statements, ids: Iterable[UUID | str] | None, queue: str | None) -> list[UUID]:
    """Make dead tasks available again (by id, or every one of a queue); returns their ids."""
    if (ids is None) == (queue is None):
        raise InvalidTask("give the ids of dead tasks or a queue, not both")
    wanted = None if ids is None else [validate.task_id(i) for i in validate.as_list(ids, "ids")]
    rows = st.all("dead_retry", {
        "ids": wanted, "queue": None if queue is None else validate.queue_name(queue),
        "buckets": st.dialect.buckets_of(wanted, st.bucket_count)})
    return [row[0] for row in rows]


def delete(st: Statements, ids: Iterable[UUID | str]) -> list[UUID]:
    """Delete the dead tasks among ``ids``; returns the ids deleted."""
    wanted = [validate.task_id(i) for i in validate.as_list(ids, "ids")]
    rows = st.all("dead_delete", {"ids": wanted,
                                  "buckets": st.dialect.buckets_of(wanted, st.bucket_count)})
    return [row[0] for row in rows]


def purge(st: Statements, queue: str, older_than_s: float) -> int:
    """Delete ``queue``'s tasks dead for longer than ``older_than_s``; returns how many."""
    rows = st.all("dead_purge", {
        "queue": validate.queue_name(queue), "buckets": list(range(st.bucket_count)),
        "older_than_s": validate.seconds("older_than_s", older_than_s)})
    return len(rows)
