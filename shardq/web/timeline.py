"""A task's history as a list of events, from the times and counts its row keeps.

shardq keeps, for each task, when it was enqueued, first and last claimed, last put
back in line, and when it is next due (or its lease runs out, or it died), with how
many times it was claimed and put back, its attempts and its last error.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shardq.core.task import TaskInfo

NEXT = {"available": "due (waiting since)", "scheduled": "due", "locked": "lease runs out",
        "dead": "died",
        # A task of a flow that waits for others keeps its place in line until released.
        "waiting": "its place in line (released once what it waits for succeeded)",
        # A parked task is woken at its wait's deadline, or sooner when what it waits for
        # comes (a sleep's end is its deadline).
        "parked": "its wait's deadline: woken then at the latest"}


@dataclass(frozen=True)
class Event:
    """Something that happened to a task (or will: a due time, a lease's end)."""

    at: datetime
    what: str


def timeline(task: TaskInfo) -> list[Event]:
    """The task's events, oldest first."""
    events = [Event(task.enqueued_at, "enqueued")]
    if task.first_claimed_at is not None:
        events.append(Event(task.first_claimed_at, "first claimed"))
    if task.last_claimed_at is not None and task.times_claimed > 1:
        events.append(Event(task.last_claimed_at,
                            f"last claimed (claimed {task.times_claimed} times)"))
    if task.last_requeued_at is not None:
        events.append(Event(task.last_requeued_at,
                            f"last put back in line (put back {task.times_requeued} times)"))
    if task.waiting_for is None:
        events.append(Event(task.exec_time, NEXT[task.state]))
    elif task.waiting_for.until is not None:  # no deadline: no time to show
        events.append(Event(task.waiting_for.until, "wakes up" if task.waiting_for.reason
                            == "sleep" else NEXT[task.state]))
    return sorted(events, key=lambda e: e.at)
