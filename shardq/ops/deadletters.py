"""Dead letters: list, retry and purge tasks that used up their attempts (or were failed).

Each operation is a :class:`~shardq.core.plan.Plan` whose arguments are checked when
it is made."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import TaskInfo
from shardq.ops import inspection

MAX_LIST = 10_000


def listing(st: Statements, queue: str, limit: int) -> Plan[list[TaskInfo]]:
    """The newest ``limit`` dead tasks of ``queue``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
        raise InvalidTask(f"limit must be an integer in [1, {MAX_LIST}], got {limit!r}")
    return inspection.tasks(st, queue, "dead", limit, newest=True)


def retry(st: Statements, ids: Iterable[UUID | str] | None,
          queue: str | None) -> Plan[list[UUID]]:
    """Make dead tasks available again (by id, or every one of a queue); the plan's value
    is their ids."""
    if (ids is None) == (queue is None):
        raise InvalidTask("give the ids of dead tasks or a queue, not both")
    wanted = None if ids is None else [validate.task_id(i) for i in validate.as_list(ids, "ids")]
    values = {"ids": wanted, "queue": None if queue is None else validate.queue_name(queue),
              "buckets": st.dialect.buckets_of(wanted, st.bucket_count)}
    return _ids(st, "dead_retry", values)


def delete(st: Statements, ids: Iterable[UUID | str]) -> Plan[list[UUID]]:
    """Delete the dead tasks among ``ids``; the plan's value is the ids deleted."""
    wanted = [validate.task_id(i) for i in validate.as_list(ids, "ids")]
    return _ids(st, "dead_delete", {"ids": wanted,
                                    "buckets": st.dialect.buckets_of(wanted, st.bucket_count)})


def purge(st: Statements, queue: str, older_than_s: float) -> Plan[int]:
    """Delete ``queue``'s tasks dead for longer than ``older_than_s``; the plan's value is
    how many."""
    values = {"queue": validate.queue_name(queue), "buckets": list(range(st.bucket_count)),
              "older_than_s": validate.seconds("older_than_s", older_than_s)}

    def steps() -> Steps[int]:
        return len((yield st.fetch("dead_purge", values)))

    return plan(steps)


def _ids(st: Statements, query: str, values: Mapping[str, Any]) -> Plan[list[UUID]]:
    """The plan of one statement that returns the ids it changed."""
    def steps() -> Steps[list[UUID]]:
        rows = yield st.fetch(query, values)
        return [row[0] for row in rows]

    return plan(steps)
