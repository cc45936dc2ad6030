"""The audit trail: who did what, through which door, with what outcome.

Every action of the dashboard's pages, its JSON API and the CLI runs as
:func:`audited`: the action's statements and the row that records them in one
transaction, so a row exists exactly when the action committed.  An audited plan is
not run again after a lost reply (it is not idempotent): the caller sees the error and
reads the trail to learn whether it happened.  Refused actions and failed logins are
recorded with :func:`record`, in a transaction of their own.  The trail is read newest
first (:func:`listing`); the janitor deletes rows older than ``audit_keep_s``
(:func:`purge`), and nothing else changes or deletes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar
from uuid import UUID

from psycopg.types.json import Jsonb

from shardq.core.plan import Atomic, Plan, Steps, plan
from shardq.core.statements import Statements

T = TypeVar("T")
Via = Literal["page", "api", "cli"]
Outcome = Literal["ok", "refused", "failed"]
LIST_MOST = 1000  # rows one read of the trail returns at most


@dataclass(frozen=True)
class Actor:
    """Who acts: a name, a role, the door (``page``, ``api`` or ``cli``) and the address
    the request came from (None for the CLI)."""

    name: str
    role: str
    via: Via
    address: str | None = None


@dataclass(frozen=True)
class Entry:
    """One action as the trail records it."""

    actor: Actor
    action: str
    queue: str | None = None
    task_id: UUID | str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def values(self, outcome: Outcome, detail: str) -> dict[str, Any]:
        """The statement's parameters."""
        return {"actor": self.actor.name, "role": self.actor.role, "via": self.actor.via,
                "address": self.actor.address, "action": self.action, "queue": self.queue,
                "task_id": str(self.task_id) if self.task_id is not None else None,
                "params": Jsonb(dict(self.params)) if self.params else None,
                "outcome": outcome, "detail": detail}


@dataclass(frozen=True)
class Record:
    """One row of the trail."""

    at: datetime
    actor: str
    role: str
    via: str
    action: str
    queue: str | None
    task_id: UUID | None
    params: dict[str, Any] | None
    outcome: str
    detail: str | None
    address: str | None


def audited(st: Statements, action: Plan[T], entry: Entry,
            detail: Callable[[T], str]) -> Plan[T]:
    """``action`` and its record in one transaction; ``detail`` says what it did (from
    the action's value).  An action that raises writes nothing: it rolled back."""
    def steps() -> Steps[T]:
        def inside() -> Steps[T]:
            value: T = yield from action.steps()
            yield st.execute("audit_write", entry.values("ok", detail(value)))
            return value

        result: T = yield Atomic(inside)
        return result

    return plan(steps, idempotent=False)


def record(st: Statements, entry: Entry, outcome: Outcome, detail: str) -> Plan[None]:
    """Record an action that did not run (refused, or a login that failed)."""
    def steps() -> Steps[None]:
        yield st.execute("audit_write", entry.values(outcome, detail))

    return plan(steps, idempotent=False)


def listing(st: Statements, *, actor: str | None = None, action: str | None = None,
            queue: str | None = None, before: datetime | None = None,
            limit: int = 100) -> Plan[list[Record]]:
    """The trail's newest ``limit`` rows (at most :data:`LIST_MOST`) from before
    ``before``, those of ``actor``, ``action`` and ``queue`` when given."""
    limit = max(1, min(int(limit), LIST_MOST))

    def steps() -> Steps[list[Record]]:
        rows = yield st.fetch(st.query("audit_list", limit),
                              {"actor": actor, "action": action, "queue": queue,
                               "before": before})
        return [Record(*row) for row in rows]

    return plan(steps)


def purge(st: Statements, limit: int) -> Plan[int]:
    """Delete up to ``limit`` rows older than ``audit_keep_s`` (the janitor's
    retention)."""
    def steps() -> Steps[int]:
        return len((yield st.fetch(st.query("audit_purge", limit),
                                   {"keep_s": st.config.audit_keep_s})))

    return plan(steps)
