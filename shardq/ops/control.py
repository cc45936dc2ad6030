"""Queue control: pause and resume a queue, cancel a task, purge a queue's waiting tasks.

The paused state lives in ``shardq.queues`` and every claim checks it, so it holds
for every worker at once and survives restarts; resuming deletes the queue's row.
Pause and resume refuse a queue with no tasks, no pause and no recent activity (a
typo would otherwise be listed as a queue from then on); ``pause(create=True)``
pauses a queue before its first task.  A cancelled task's row is deleted:
a waiting task is simply gone, and a running task's worker learns it at its next
heartbeat (the lease extension finds no row), tells the handler through
``shardq.current().cancelled`` and drops its result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import UnknownQueue
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


def pause(st: Statements, queue: str, *, create: bool = False) -> datetime:
    """Pause ``queue``: it keeps accepting tasks and hands out none.  Returns when it
    was paused (the first pause's time when it already was).  A queue shardq does not
    know (see :func:`known`) is refused with :class:`UnknownQueue` unless ``create``."""
    name = validate.queue_name(queue)
    if not create and not known(st, name):
        raise UnknownQueue(name, names(st), "to pause it before its first task, pass "
                                            "create=True")
    row = st.one("queue_pause", {"queue": name})
    paused_at: datetime = row[0]
    return paused_at


def resume(st: Statements, queue: str) -> bool:
    """Resume ``queue``; returns whether it was paused.  A queue shardq does not know
    (see :func:`known`) is refused with :class:`UnknownQueue`."""
    name = validate.queue_name(queue)
    row = st.one("queue_resume", {"queue": name})
    if row is not None and row[0] is not None:
        return True
    if not known(st, name):
        raise UnknownQueue(name, names(st))
    return False


def known(st: Statements, queue: str) -> bool:
    """Whether ``queue`` has tasks, is paused, or was active in the last hour: the
    queues that ``stats`` lists."""
    found: bool = st.one("queue_known", {"queue": queue, "bucket_count": st.bucket_count})[0]
    return found


def names(st: Statements) -> list[str]:
    """Every queue shardq knows (see :func:`known`), sorted."""
    return [row[0] for row in st.all("queue_names", {"bucket_count": st.bucket_count})]


def paused(st: Statements) -> dict[str, datetime]:
    """Every paused queue and when it was paused."""
    return {name: at for name, at in st.all("queue_states")}


def cancel(st: Statements, task_id: UUID | str) -> Cancelled:
    """Cancel a waiting or running task (its row is deleted); see the module's docstring."""
    tid = validate.task_id(task_id)
    row = st.one("task_cancel", {"id": tid})
    return Cancelled(tid, row[0] if row else None)


def purge(st: Statements, queue: str, at_most: int | None = None) -> int:
    """Delete every waiting task (due or scheduled) of ``queue``, bucket by bucket in
    batches of :data:`PURGE_BATCH`; running and dead tasks stay.  With ``at_most``, stop
    once that many are deleted (a bounded call; call again for the rest).  Returns how
    many were deleted."""
    name = validate.queue_name(queue)
    removed = 0
    for bucket in range(st.bucket_count):
        while at_most is None or removed < at_most:
            limit = PURGE_BATCH if at_most is None else min(PURGE_BATCH, at_most - removed)
            batch = len(st.all(st.query("queue_purge", limit), {"queue": name,
                                                                "bucket": bucket}))
            removed += batch
            if batch < limit:
                break
    return removed
