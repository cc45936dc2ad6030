"""Dead letters: list, retry, redrive and purge tasks that used up their attempts (or were
failed).

Each operation is a :class:`~shardq.core.plan.Plan` whose arguments are checked when
it is made."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import TaskInfo
from shardq.ops import inspection

MAX_LIST = 10_000
MAX_REDRIVE = 10_000  # dead tasks one redrive makes eligible (or a dry run counts) at most
MAX_ERROR_FILTER = 1000  # characters of a redrive's error filter


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


@dataclass(frozen=True)
class Redriven:
    """What :func:`redrive` did: ``count`` dead tasks made eligible again (with
    ``dry_run``: the matching ones counted, nothing changed).  ``more`` says the call
    stopped at its limit: more may match (run it again), or for a dry run, there are at
    least ``count``."""

    count: int
    more: bool = False
    dry_run: bool = False

    def sentence(self, queue: str) -> str:
        """What was done (or a dry run found) in one line, for people."""
        if self.dry_run:
            return (f"would redrive {'at least ' if self.more else ''}{self.count:,} dead "
                    f"task(s) of {queue}")
        return (f"redrove {self.count:,} dead task(s) of {queue}"
                + ("; more remain: run again" if self.more else ""))


def redrive(st: Statements, queue: str, *, error: str | None = None,
            older_than_s: float | None = None, newer_than_s: float | None = None,
            dry_run: bool = False, limit: int = 1000) -> Plan[Redriven]:
    """Make eligible again, as :func:`retry` does, up to ``limit`` dead tasks of
    ``queue`` (oldest first in each bucket): those whose last error contains ``error``
    (any case; a plain substring), that died more than ``older_than_s`` and less than
    ``newer_than_s`` seconds ago.  With ``dry_run``, count them instead (up to
    :data:`MAX_REDRIVE`) and change nothing.  A keyed task whose key has a waiting task
    stays dead, and of several dead tasks of one key only the oldest comes back."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_REDRIVE:
        raise InvalidTask(f"limit must be an integer in [1, {MAX_REDRIVE}], got {limit!r}")
    if error is not None and (not isinstance(error, str)
                              or not 1 <= len(error) <= MAX_ERROR_FILTER):
        raise InvalidTask(f"error must be text of 1 to {MAX_ERROR_FILTER} characters, "
                          f"got {error!r:.60}")
    older = validate.seconds("older_than_s", older_than_s) or 0.0
    newer = validate.seconds("newer_than_s", newer_than_s)
    if newer is not None and newer <= older:
        raise InvalidTask(f"newer_than_s ({newer:g}) must be more than older_than_s "
                          f"({older:g}): no task died in between")
    cap = MAX_REDRIVE if dry_run else limit
    values = {"queue": validate.queue_name(queue), "error": error, "older_than_s": older,
              "newer_than_s": newer, "bucket_count": st.bucket_count}

    def steps() -> Steps[Redriven]:
        [(before, after)] = yield st.fetch("dead_match_bounds", values)
        rows = yield st.fetch(st.query("dead_match", cap),
                              {**values, "before": before, "after": after})
        more = len(rows) >= cap
        if dry_run or not rows:
            return Redriven(len(rows), more, dry_run=dry_run)
        chosen, keys = [], set()
        for _bucket, task_id, key in rows:  # one task per key: the key's waiting task
            if key is None or key not in keys:
                chosen.append(task_id)
                keys.add(key)
        buckets = sorted({row[0] for row in rows})
        revived = yield st.fetch("dead_retry", {"ids": chosen, "queue": None,
                                                "buckets": buckets})
        return Redriven(len(revived), more)

    return plan(steps)


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
