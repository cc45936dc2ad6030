"""The workers: one row of ``shardq.workers`` per running ``shardq consume`` process.

A worker writes its row when it starts (:func:`register`), moves its ``last_seen_at``
from its heartbeat (the same upsert), and deletes it when it stops cleanly
(:func:`remove`).  Its id is written on every task it claims (``tasks.worker_id``) and
its name, host and pid on every attempt it ends.  A worker not seen for
``worker_stale_s`` is listed as not alive, and the janitor deletes its row
(:func:`prune`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements


@dataclass(frozen=True)
class WorkerInfo:
    """One registered worker process, and what it holds now."""

    id: UUID
    name: str
    host: str
    pid: int
    queues: list[str]
    started_at: datetime
    last_seen_at: datetime
    alive: bool
    """Seen within ``worker_stale_s``."""
    holding: int
    """Tasks its claims hold now."""


def register(st: Statements, worker_id: UUID, name: str, host: str, pid: int,
             queues: Sequence[str]) -> Plan[None]:
    """Write the worker's row, or move its ``last_seen_at`` to now."""
    def steps() -> Steps[None]:
        yield st.execute("worker_register", {"id": worker_id, "name": name, "host": host,
                                             "pid": pid, "queues": list(queues)})

    return plan(steps)


def remove(st: Statements, worker_id: UUID) -> Plan[None]:
    """Delete the worker's row (a clean stop)."""
    def steps() -> Steps[None]:
        yield st.execute("worker_remove", {"id": worker_id})

    return plan(steps)


def listing(st: Statements) -> Plan[list[WorkerInfo]]:
    """Every registered worker by name, alive or not yet pruned, with the tasks it holds."""
    def steps() -> Steps[list[WorkerInfo]]:
        rows = yield st.fetch("workers_list", {"worker_stale_s": st.config.worker_stale_s})
        return [WorkerInfo(*row) for row in rows]

    return plan(steps)


def prune(st: Statements) -> Plan[int]:
    """Delete the rows of workers not seen for ``worker_stale_s`` (the janitor runs
    it); its value is how many."""
    def steps() -> Steps[int]:
        rows = yield st.fetch("janitor_workers", {"worker_stale_s": st.config.worker_stale_s})
        return len(rows)

    return plan(steps)
