"""What the dashboard shows, read in bounded time however large the table.

Every read here is a fixed number of bounded index range scans (per bucket, with a
LIMIT) or a read of the small tables (``shardq.queues``, ``shardq.throughput``):
queue figures come from :mod:`shardq.ops.queuestats`, task lists from
:func:`shardq.ops.inspection.tasks`, the hour's throughput from :mod:`shardq.ops.history`.
A flow (:func:`shardq.ops.graphs.get`) is read through the index of its tasks: its
counts take as long as it has tasks, and its list at most :data:`FLOW_ROWS` of them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.plan import Plan
from shardq.core.statements import Statements
from shardq.core.task import TaskInfo
from shardq.flows.nodes import Flow
from shardq.ops import graphs, history, inspection, queuestats
from shardq.ops.queuestats import QueueStats
from shardq.ops.workers import WorkerInfo
from shardq.web.masks import Masks, Show, shown

LIST_ROWS = 20  # tasks in each list of a queue's page
FLOW_ROWS = 500  # tasks listed on a flow's page
# Threads that run a page's reads at once (each holds a pooled connection meanwhile).
_READERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="shardq-web")


@dataclass(frozen=True)
class QueueView:
    """One queue's page: its figures, its tasks in line, running and dead, and its hour."""

    stats: QueueStats
    oldest_waiting: list[TaskInfo]
    """Due tasks that have waited longest (the head of the line)."""
    newest_waiting: list[TaskInfo]
    """Due tasks that became due last."""
    next_scheduled: list[TaskInfo]
    """Tasks not yet due, soonest first."""
    running: list[TaskInfo]
    """Running tasks, the soonest lease expiry first."""
    dead: list[TaskInfo]
    """Dead letters, newest first, with their last error."""
    throughput: list[history.Minute]


def now(st: Statements) -> datetime:
    """The clock's time (this machine's when the clock is the database's own)."""
    return st.clock.now() or datetime.now(UTC)


def queue_view(st: Statements, name: str, rows: int = LIST_ROWS) -> QueueView:
    """Everything on one queue's page.  The reads are independent, so they run at once,
    each on a connection of the client's pool: the page takes as long as the slowest
    (the figures), not the sum."""
    at = now(st)
    name = validate.queue_name(name)
    plans: dict[str, Plan[Any]] = {
        "stats": queuestats.stats(st, name),
        "oldest_waiting": inspection.tasks(st, name, "available", rows, before=at),
        "newest_waiting": inspection.tasks(st, name, "available", rows, newest=True, before=at),
        "next_scheduled": inspection.tasks(st, name, "available", rows, after=at),
        "running": inspection.tasks(st, name, "locked", rows),
        "dead": inspection.tasks(st, name, "dead", rows, newest=True),
    }
    reads: dict[str, Callable[[], Any]] = {
        **{field: partial(st.perform, plan) for field, plan in plans.items()},
        "throughput": partial(st.perform, history.series(st, name)),
    }
    futures = {field: _READERS.submit(read) for field, read in reads.items()}
    return QueueView(**{field: future.result() for field, future in futures.items()})


def payload_bytes(payload: Any) -> int:
    """The size of a payload as JSON text."""
    return len(json.dumps(payload, separators=(",", ":")).encode())


def task_json(task: TaskInfo, show: Show, masks: Masks) -> dict[str, Any]:
    """A task's record as JSON-ready values, shown as ``show`` says (see
    :mod:`shardq.web.masks`): with ``sizes``, its payload's size (``payload_bytes``)
    instead of the payload, and each step's (``value_bytes``) instead of its value."""
    out = {k: plain(v) for k, v in dataclasses.asdict(shown(task, show, masks)).items()}
    if show == "sizes":  # a durable task's step values are hidden as its payload is
        out["payload_bytes"] = payload_bytes(out.pop("payload"))
        for step in out["steps"]:
            step["value_bytes"] = payload_bytes(step.pop("value"))
    return out


LISTS = ("oldest_waiting", "newest_waiting", "next_scheduled", "running", "dead")


def queue_json(view: QueueView, show: Show, masks: Masks) -> dict[str, Any]:
    """A queue's page as JSON-ready values (its tasks shown as ``show`` says)."""
    return {"stats": view.stats.as_dict(),
            **{name: [task_json(t, show, masks) for t in getattr(view, name)]
               for name in LISTS},
            "throughput": minutes_json(view.throughput)}


def shown_view(view: QueueView, show: Show, masks: Masks) -> QueueView:
    """A queue's page with its tasks as the dashboard shows them (see
    :func:`shardq.web.masks.shown`)."""
    lists: dict[str, Any] = {name: [shown(t, show, masks) for t in getattr(view, name)]
                             for name in LISTS}
    return dataclasses.replace(view, **lists)


def minutes_json(minutes: list[history.Minute]) -> list[dict[str, Any]]:
    """Per-minute throughput as JSON-ready values."""
    return [{"at": m.at.isoformat(), "enqueued": m.enqueued, "completed": m.completed}
            for m in minutes]


def plain(value: Any) -> Any:
    """``value`` as JSON holds it: uuids and times as text, at any depth."""
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):  # a task's attempts, a worker's queues
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def workers_json(found: list[WorkerInfo]) -> list[dict[str, Any]]:
    """The workers' list as JSON-ready values."""
    return [{k: plain(v) for k, v in dataclasses.asdict(w).items()} for w in found]


def flow(st: Statements, flow_id: UUID | str, rows: int) -> Flow | None:
    """A flow with its first ``rows`` tasks; None for an unknown id."""
    return st.perform(graphs.get(st, flow_id, rows))


@dataclass(frozen=True)
class Progress:
    """How far a flow got: its tasks that finished (succeeded, died or were cancelled) out
    of all of them, and each outcome's share in percent (the progress bar's segments)."""

    finished: int
    total: int
    shares: dict[str, float]

    @property
    def percent(self) -> float:
        """The finished tasks' share of all, in percent."""
        return 100.0 * self.finished / self.total if self.total else 0.0


FINISHED = ("succeeded", "dead", "cancelled")


def progress(found: Flow) -> Progress:
    """The flow's progress.  An open batch counts its tasks once it is sealed: until then
    its total is the tasks counted so far."""
    total = max(found.tasks, sum(found.counts.values()))
    done = {state: found.counts.get(state, 0) for state in FINISHED}
    shares = {state: 100.0 * n / total if total else 0.0 for state, n in done.items()}
    return Progress(sum(done.values()), total, shares)


def flow_json(found: Flow) -> dict[str, Any]:
    """A flow as JSON-ready values, with its progress (``finished`` of ``total`` tasks)."""
    done = progress(found)
    return {**found.as_dict(), "progress": {"finished": done.finished, "total": done.total}}
