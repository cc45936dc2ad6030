"""Queue control: pause and resume a queue, cancel a task, purge a queue's waiting tasks.

Each operation is a :class:`~shardq.core.plan.Plan` (run it with ``st.perform(plan)``,
or an asyncio runner's ``perform``); its arguments are checked when the plan is made.
The paused state lives in ``shardq.queues`` and every claim checks it, so it holds
for every worker at once and survives restarts; resuming clears it (and deletes
the queue's row unless it holds limits, see :mod:`shardq.ops.flow`).  A pause may
end by itself (``until``): from then on claims hand out the queue's tasks and every
reader counts it as not paused; the janitor clears it later (:func:`end_pauses`).
Pause and resume refuse a queue with no tasks, no pause and no recent activity (a
typo would otherwise be listed as a queue from then on); ``pause(create=True)``
pauses a queue before its first task.  A cancelled task's row is deleted:
a waiting task is simply gone, and a running task's worker learns it at its next
heartbeat (the lease extension finds no row), tells the handler through
``shardq.current().cancelled`` and drops its result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask, UnknownQueue
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements

PURGE_BATCH = 1000  # tasks one purge statement deletes at most: short locks, short WAL bursts


@dataclass(frozen=True)
class Cancelled:
    """What :func:`cancel` did: ``status`` is the state the task was in ('available' or
    'locked'), or None when there was nothing to cancel (finished, dead or unknown)."""

    task_id: UUID
    status: str | None

    @property
    def was_running(self) -> bool:
        """Whether a worker held the task (its handler sees ``cancelled`` at the next
        heartbeat)."""
        return self.status == "locked"


@dataclass(frozen=True)
class Pause:
    """A queue's pause: since when, and until when (None: until it is resumed)."""

    at: datetime
    until: datetime | None = None


def pause(st: Statements, queue: str, *, until: datetime | None = None,
          create: bool = False) -> Plan[datetime]:
    """Pause ``queue``: it keeps accepting tasks and hands out none, until it is resumed
    or, with ``until`` (a timezone-aware time to come), until then.  A pause without
    ``until`` is open-ended, even on a queue paused until some time.  The plan's value
    is when it was paused (the first pause's time when it already was).  A queue shardq
    does not know (see :func:`known`) is refused with :class:`UnknownQueue` unless
    ``create``."""
    name = validate.queue_name(queue)
    end = validate.aware("until", until)
    now = st.clock.now() or datetime.now(UTC)
    if end is not None and end <= now:
        raise InvalidTask(f"until must be a time to come, got {end.isoformat()} "
                          f"(now is {now.isoformat()})")

    def steps() -> Steps[datetime]:
        if not create and not (yield from known(st, name)):
            raise UnknownQueue(name, (yield from names(st)), "to pause it before its first "
                                                             "task, pass create=True")
        rows = yield st.fetch("queue_pause", {"queue": name, "until": end})
        paused_at: datetime = rows[0][0]
        return paused_at

    return plan(steps)


def resume(st: Statements, queue: str) -> Plan[bool]:
    """Resume ``queue``; the plan's value is whether it was paused.  A queue shardq does
    not know (see :func:`known`) is refused with :class:`UnknownQueue`."""
    name = validate.queue_name(queue)

    def steps() -> Steps[bool]:
        rows = yield st.fetch("queue_resume", {"queue": name})
        yield st.execute("limits_tidy", {"queue": name})
        if rows and rows[0][0] is not None:
            return True
        if not (yield from known(st, name)):
            raise UnknownQueue(name, (yield from names(st)))
        return False

    return plan(steps)


def known(st: Statements, queue: str) -> Steps[bool]:
    """Steps (for ``yield from``): whether ``queue`` has tasks, is paused, or was active
    in the last hour: the queues that ``stats`` lists."""
    rows = yield st.fetch("queue_known", {"queue": queue, "bucket_count": st.bucket_count})
    found: bool = rows[0][0]
    return found


def names(st: Statements) -> Steps[list[str]]:
    """Steps (for ``yield from``): every queue shardq knows (see :func:`known`), sorted."""
    rows = yield st.fetch("queue_names", {"bucket_count": st.bucket_count})
    return [row[0] for row in rows]


def paused(st: Statements) -> Plan[dict[str, datetime]]:
    """Every paused queue and when it was paused (a pause that ended is none)."""
    found = pauses(st)

    def steps() -> Steps[dict[str, datetime]]:
        return {name: p.at for name, p in (yield from found.steps()).items()}

    return plan(steps)


def pauses(st: Statements) -> Plan[dict[str, Pause]]:
    """Every paused queue's :class:`Pause` (a pause that ended is none)."""
    def steps() -> Steps[dict[str, Pause]]:
        rows = yield st.fetch("queue_states")
        return {name: Pause(at, until) for name, at, until in rows}

    return plan(steps)


def end_pauses(st: Statements) -> Plan[list[str]]:
    """Clear the pauses that ended (``until`` passed) and tidy each queue's row as
    :func:`resume` does: the janitor's.  Claims needed none of it to hand out the
    queues' tasks again.  The plan's value is the queues' names."""
    def steps() -> Steps[list[str]]:
        ended = [row[0] for row in (yield st.fetch("pauses_ended"))]
        for name in ended:
            yield st.execute("limits_tidy", {"queue": name})
        return ended

    return plan(steps)


def cancel(st: Statements, task_id: UUID | str) -> Plan[Cancelled]:
    """Cancel a waiting or running task (its row is deleted); see the module's docstring."""
    tid = validate.task_id(task_id)

    def steps() -> Steps[Cancelled]:
        rows = yield st.fetch("task_cancel", {"id": tid})
        return Cancelled(tid, rows[0][0] if rows else None)

    return plan(steps)


def purge(st: Statements, queue: str, at_most: int | None = None) -> Plan[int]:
    """Delete every waiting task (due or scheduled) of ``queue``, bucket by bucket in
    batches of :data:`PURGE_BATCH` (each its own statement: no long transaction); running
    and dead tasks stay.  With ``at_most``, stop once that many are deleted (a bounded
    call; call again for the rest).  The plan's value is how many were deleted; an
    attempt retried after a failure starts over, which deletes nothing twice but counts
    only what the last attempt deleted."""
    name = validate.queue_name(queue)

    def steps() -> Steps[int]:
        removed = 0
        for bucket in range(st.bucket_count):
            while at_most is None or removed < at_most:
                limit = PURGE_BATCH if at_most is None else min(PURGE_BATCH, at_most - removed)
                batch = len((yield st.fetch(st.query("queue_purge", limit),
                                            {"queue": name, "bucket": bucket})))
                removed += batch
                if batch < limit:
                    break
        return removed

    return plan(steps)
