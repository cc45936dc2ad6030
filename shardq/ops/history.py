"""Throughput over the last hour: per-minute counts of tasks enqueued and completed.

The enqueue and ack statements add their counts to ``shardq.throughput`` per second
(``sql/throughput_add.sql``; :mod:`shardq.ops.queuestats` reads the last minute of them
for its rates).  The janitor folds seconds older than :data:`KEEP_S` into one row per
queue and minute, and forgets minutes older than :data:`HISTORY_S`, so the table
stays small (at most a few thousand rows per active queue) and :func:`series` reads
an hour of history without touching the tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Atomic, Plan, Steps, plan
from shardq.core.statements import Statements

KEEP_S = 300.0  # per-second counts kept (rates read the last minute of them)
HISTORY_S = 3900.0  # minute rows kept: an hour's chart and some slack
MAX_MINUTES = 60


@dataclass(frozen=True)
class Minute:
    """Tasks enqueued and completed in one minute (``at`` is the minute's start)."""

    at: datetime
    enqueued: int
    completed: int


def fold(st: Statements) -> Plan[int]:
    """Fold old per-second counts into minute rows and forget expired minutes, in one
    transaction; its value is how many per-second rows were folded (the janitor runs it)."""
    params = {"keep_s": KEEP_S, "history_s": HISTORY_S}

    def folded() -> Steps[int]:
        rows = yield st.fetch("throughput_fold", params)
        if rows:
            queues, minutes, enqueued, completed = (list(c) for c in zip(*rows, strict=True))
            yield st.execute("throughput_fold_add", {"queues": queues, "minutes": minutes,
                                                     "enqueued": enqueued,
                                                     "completed": completed})
        return len(rows)

    def steps() -> Steps[int]:
        count: int = yield Atomic(folded)
        return count

    return plan(steps)


def series(st: Statements, queue: str | None = None,
           minutes: int = MAX_MINUTES) -> Plan[list[Minute]]:
    """Per-minute counts of ``queue`` (every queue when None) over the last ``minutes``
    minutes, the current one last; a minute with nothing counted has zeros."""
    if isinstance(minutes, bool) or not isinstance(minutes, int) \
            or not 1 <= minutes <= MAX_MINUTES:
        raise InvalidTask(f"minutes must be an integer in [1, {MAX_MINUTES}], got {minutes!r}")
    name = None if queue is None else validate.queue_name(queue)

    def steps() -> Steps[list[Minute]]:
        rows = yield st.fetch("throughput_history", {"queue": name, "minutes": minutes})
        return [Minute(at, enqueued, completed) for at, enqueued, completed in rows]

    return plan(steps)
