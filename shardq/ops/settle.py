"""Settling claimed tasks: ack, nack, defer and extend, each checked against the lease token.

Every statement finds the tasks' rows by id (see :func:`shardq.core.task.addresses`) and
touches a row only while it is locked under the task's lease token.  Each may be run
again after its reply was lost (the database retries it): a task the statement did
not touch is looked up once more, and counts as settled when it shows the effect of
an earlier attempt (an acked task is gone; a failed, released or deferred one is
back in line under the token it was claimed with).  The others are reported as
:class:`LeaseLost`.

Each function validates its arguments and returns the :class:`~shardq.core.plan.Plan`
of the call, which either client runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask, LeaseLost
from shardq.core.plan import Plan, Steps, done
from shardq.core.statements import Statements
from shardq.core.task import Task, addresses
from shardq.ops import keys, results
from shardq.ops.results import Kept


def ack(st: Statements, tasks: Sequence[Task],
        kept: Sequence[Kept | None] | None = None) -> Plan[None]:
    """Finish tasks (delete them), keeping the results in ``kept`` (one entry per task,
    None for a task that keeps none) in the same statement.

    The statement returns only how many it deleted, not which: decoding a uuid for
    each task of a full batch was a measurable share of a worker's time.  Only when
    some are missing are the batch's rows looked up.  A batch without results runs
    the plain statement, which writes nothing else.
    """
    tasks = _distinct(tasks)
    if not tasks:
        return done(None)
    name, where = "ack_many", addresses(tasks)
    if kept is not None and any(kept):
        name, where = "ack_results", {**where, **results.columns(tasks, kept)}

    def steps() -> Steps[None]:
        deleted = (yield st.fetch(name, where))[0][0]
        if deleted != len(tasks):
            _raise_lost((yield from _unsettled(st, tasks, _gone)))

    return Plan(steps)


def nack(st: Statements, tasks: Sequence[Task], errors: Sequence[str | None] | None,
         retry_in_s: Sequence[float | None] | None, dead: Sequence[bool] | None) -> Plan[None]:
    """Record failures: back in line after the backoff (or ``retry_in_s``), or dead."""
    tasks = validate.tasks(tasks)
    n = len(tasks)
    errs = validate.error_texts(errors, n) or [None] * n
    delays = [validate.seconds("retry_in_s", d)
              for d in validate.parallel("retry_in_s", retry_in_s, n)]
    kill = [bool(d) for d in validate.parallel("dead", dead, n)]
    # Keyed tasks that retry merge with their follow-up; the rest are one UPDATE.
    merge = [i for i, t in enumerate(tasks)
             if t.key is not None and not kill[i] and not t.is_last_attempt]
    return _split(
        st, tasks, merge,
        lambda rest: ("nack_many", {"errors": [errs[i] for i in rest],
                                    "retry_in_s": [delays[i] for i in rest],
                                    "dead": [kill[i] for i in rest]}),
        lambda group: keys.putback(
            st, group, run_at=[None] * len(group), delays_s=[delays[i] for i in merge],
            use_backoff=[delays[i] is None for i in merge], errors=[errs[i] for i in merge],
            keep_errors=False, attempt_change=0, outcome="failed"))


def defer(st: Statements, tasks: Sequence[Task], delay_s: float | None,
          run_at: datetime | None) -> Plan[None]:
    """Give tasks back without penalty, not to run before ``run_at`` / ``delay_s`` from now."""
    tasks = validate.tasks(tasks)
    delay_s, run_at = validate.schedule(delay_s, run_at)
    # The attempt's record says which: back in line at once, or for later.
    outcome = "released" if run_at is None and not delay_s else "deferred"
    merge = [i for i, t in enumerate(tasks) if t.key is not None]
    return _split(
        st, tasks, merge,
        lambda rest: ("requeue_many", {"run_ats": [run_at] * len(rest),
                                       "delays_s": [delay_s or 0.0] * len(rest),
                                       "outcome": outcome}),
        lambda group: keys.putback(
            st, group, run_at=[run_at] * len(group), delays_s=[delay_s] * len(group),
            use_backoff=[False] * len(group), errors=[None] * len(group), keep_errors=True,
            attempt_change=-1, outcome=outcome))


def extend(st: Statements, tasks: Sequence[Task], by_s: float | Sequence[float]) -> Plan[None]:
    """Make the leases end ``by_s`` from now (never sooner): one length for every task, or
    one per task; the tasks are updated in place.

    exec_time is part of the row's key while the lease lasts, and on CockroachDB the
    bucket is a hash of the whole key: the statement returns both, and the tasks keep
    addressing their rows by the new values.
    """
    tasks = _distinct(tasks)
    if isinstance(by_s, int | float):
        by = [validate.seconds("by_s", by_s)] * len(tasks)
    else:
        by = [validate.seconds("by_s", b) for b in by_s]
        if len(by) != len(tasks):
            raise InvalidTask(f"by_s has {len(by)} lengths for {len(tasks)} tasks")
    if not tasks:
        return done(None)
    values = {**addresses(tasks), "by_s": by}

    def steps() -> Steps[None]:
        found = {row[0]: row for row in (yield st.fetch("extend_many", values))}
        for t in tasks:
            if t.id in found:
                t.exec_time, t.bucket = found[t.id][1], found[t.id][2]
        _raise_lost([t.id for t in tasks if t.id not in found])

    return Plan(steps)


def _distinct(tasks: Sequence[Task]) -> list[Task]:
    tasks = validate.tasks(tasks)
    if len({t.id for t in tasks}) != len(tasks):
        raise InvalidTask("the same task appears twice in one batch")
    return tasks


Found = tuple[UUID, str, UUID | None] | None  # a task's row now: id, status, lease token


def _gone(task: Task, row: Found) -> bool:
    """An ack took effect: the row is gone."""
    return row is None


def _back_in_line(task: Task, row: Found) -> bool:
    """A nack, release or defer took effect: unlocked, and still under the task's token."""
    return row is not None and row[1] != "locked" and row[2] == task.lease_token


def _fenced(st: Statements, name: str, tasks: list[Task], extra: dict[str, Any], *,
            settled: Callable[[Task, Found], bool]) -> Steps[list[UUID]]:
    """Run a lease-checked batch statement; returns the ids of the tasks whose lease
    was lost (untouched, and not showing ``settled`` effect of an earlier attempt)."""
    rows = yield st.fetch(name, {**addresses(tasks), **extra})
    if len(rows) == len(tasks):
        return []  # every task was found (each row is a distinct one of them)
    touched = {row[0] for row in rows}
    return (yield from _unsettled(st, [t for t in tasks if t.id not in touched], settled))


def _unsettled(st: Statements, tasks: list[Task], settled: Callable[[Task, Found], bool]
               ) -> Steps[list[UUID]]:
    """The ids of ``tasks`` whose rows do not show ``settled``'s effect now."""
    rows = yield st.fetch("settled_check", {"ids": [t.id for t in tasks]})
    now = {row[0]: row for row in rows}
    return [t.id for t in tasks if not settled(t, now.get(t.id))]


def _split(st: Statements, tasks: Sequence[Task], merge: list[int],
           plain: Callable[[list[int]], tuple[str, dict[str, Any]]],
           keyed: Callable[[list[Task]], Steps[set[UUID]]]) -> Plan[None]:
    """Settle ``tasks`` in two groups: those at ``merge`` through ``keyed`` (keyed tasks that
    go back in line), the rest through the statement ``plain`` names for their indexes.
    Raises LeaseLost once, for the tasks either group did not touch."""
    tasks = _distinct(tasks)
    chosen = set(merge)
    rest = [i for i in range(len(tasks)) if i not in chosen]
    group = [tasks[i] for i in merge]

    def steps() -> Steps[None]:
        lost: list[UUID] = []
        if rest:
            name, extra = plain(rest)
            lost += yield from _fenced(st, name, [tasks[i] for i in rest], extra,
                                       settled=_back_in_line)
        if group:
            touched = yield from keyed(group)
            lost += [t.id for t in group if t.id not in touched]
        _raise_lost(lost)

    return Plan(steps)


def _raise_lost(lost: list[UUID]) -> None:
    if lost:
        raise LeaseLost(lost)
