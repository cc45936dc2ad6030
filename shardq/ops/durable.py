"""Durable tasks in the database: checkpoints, parks, events and children.

A durable task's calls (:mod:`shardq.durable`) are checkpointed in ``shardq.steps``,
keyed by task and name.  A task that waits is *parked*: its claim given back without
penalty, ``available`` at its wake-up time (beyond every claim's range until then),
with why in ``tasks.parked``.  Timed wake-ups need nothing more: the task is claimed
when due.  An emit (:func:`emit`) makes the tasks parked on its events due now; the
flows' resolver does the same for a task whose children's events it folds in
(``parents_wake``).  ``sql/park_many.sql`` says why no wake-up is missed.

Each function validates its arguments and returns the plan of the call, which either
client (or a worker's durable runtime) runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask, LeaseLost
from shardq.core.plan import Atomic, Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import Task
from shardq.flows.canvas import Signature
from shardq.flows.nodes import Node
from shardq.ops import graphs, produce

NEVER = datetime(9999, 1, 1, tzinfo=UTC)
"""The wake-up time of a task parked without a deadline: beyond every claim's range,
and a time Python can read back (PostgreSQL's 'infinity' is not)."""
MAX_EVENT_NAME = 512
MAX_EMITTED = 10_000  # events one emit call writes at most


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One durable call of a task as stored: its kind (step, sleep, event, spawn, wait),
    state (done, waiting, timed_out), value as JSON text, and deadline."""

    kind: str
    state: str
    value: str | None
    until: datetime | None

    @property
    def decoded(self) -> Any:
        """The value, decoded from its JSON."""
        return None if self.value is None else json.loads(self.value)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A task's checkpoints by name, and the server's clock when they were read."""

    now: datetime
    checkpoints: dict[str, Checkpoint]


@dataclass(frozen=True, slots=True)
class Parking:
    """Why and until when a task parks (``until`` None: no deadline), and what for."""

    reason: str
    until: datetime | None
    event: str | None = None
    seen: int | None = None
    note: str = ""


def event_name(name: object) -> str:
    """An event's name: text of 1 to 512 characters."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_EVENT_NAME:
        raise InvalidTask(f"an event's name is text of 1 to {MAX_EVENT_NAME} characters, "
                          f"got {name!r:.80}")
    return validate.storable("an event's name", name)


def load(st: Statements, task_id: UUID) -> Plan[Loaded]:
    """A task's checkpoints, with the server's clock."""
    def steps() -> Steps[Loaded]:
        rows = yield st.fetch("steps_load", st.params(id=task_id))
        found = {name: Checkpoint(kind, state, value, until)
                 for _now, name, kind, state, value, until in rows if name is not None}
        return Loaded(rows[0][0], found)

    return plan(steps)


def save(st: Statements, task: Task, name: str, kind: str, state: str, value: str | None,
         until: datetime | None) -> Plan[tuple[Checkpoint, bool]]:
    """Checkpoint one call under the task's lease: the checkpoint as stored (the first
    write of a name wins), and whether this call wrote it.  Raises :class:`LeaseLost`
    when the lease is gone.  Safe to run again after a lost reply."""
    def steps() -> Steps[tuple[Checkpoint, bool]]:
        return (yield from _save(st, task, name, kind, state, value, until))

    return plan(steps)


def _save(st: Statements, task: Task, name: str, kind: str, state: str, value: str | None,
          until: datetime | None) -> Steps[tuple[Checkpoint, bool]]:
    rows = yield st.fetch("step_save", st.params(
        id=task.id, token=task.lease_token, name=name, kind=kind, state=state,
        value=value, until=until))
    owned, wrote, stored_state, stored = rows[0]
    if not owned or stored_state is None:
        raise LeaseLost([task.id])
    return Checkpoint(kind, stored_state, stored, until), bool(wrote)


def spawn(st: Statements, task: Task, name: str, sig: Signature,
          child_id: UUID) -> Plan[UUID]:
    """Enqueue ``sig`` as a child of ``task`` under ``name``, once: in one transaction
    with its checkpoint, and into the flow of the task's children (whose results are
    kept for the task, and whose events wake it).  A child spawned before under that
    name (a replay, or this call run again after a lost reply) is returned, not
    enqueued again."""
    row = graphs.task_row(st, f"child {name!r}", Node(sig, (), None))
    row.update(next=None, deps=None, waits=0)

    def writes() -> Steps[UUID]:
        stored, wrote = yield from _save(st, task, name, "spawn", "done",
                                         json.dumps(str(child_id)), None)
        if not wrote:
            return UUID(stored.decoded)
        flows = yield st.fetch("spawn_flow", st.params(
            id=task.id, token=task.lease_token, name=f"children of task {task.id}"[:256],
            keep_result_s=graphs.keep_for(None)))
        if not flows:
            raise LeaseLost([task.id])
        yield st.fetch("flow_insert", graphs.arrays(task.id, [child_id], [row], {
            "trace_context": task.trace_context, "notify": st.config.notify}))
        return child_id

    def steps() -> Steps[UUID]:
        child: UUID = yield Atomic(writes)
        return child

    return plan(steps)


def children(st: Statements, parent: UUID, ids: Sequence[UUID]) -> Plan[list[Any]]:
    """What became of ``parent``'s children ``ids``, in order, with the count of their
    events folded in (see ``sql/children_state.sql``)."""
    def steps() -> Steps[list[Any]]:
        return list((yield st.fetch("children_state", {"parent": parent, "ids": list(ids)})))

    return plan(steps)


def event(st: Statements, name: str) -> Plan[tuple[bool, str | None]]:
    """Whether event ``name`` was emitted, and its payload's JSON text."""
    def steps() -> Steps[tuple[bool, str | None]]:
        rows = yield st.fetch("event_get", {"name": name})
        return (True, rows[0][0]) if rows else (False, None)

    return plan(steps)


def park(st: Statements, tasks: Sequence[Task],
         parkings: Sequence[Parking]) -> Plan[list[tuple[UUID, bool]]]:
    """Park ``tasks`` (see ``sql/park_many.sql``); returns each parked task's id and
    whether it is due at once (what it waits for came meanwhile).  A task missing from
    the answer had lost its lease."""
    values = st.params(
        ids=[t.id for t in tasks], tokens=[t.lease_token for t in tasks],
        untils=[p.until if p.until is not None else NEVER for p in parkings],
        reasons=[p.reason for p in parkings], events=[p.event for p in parkings],
        seen=[p.seen for p in parkings], notes=[p.note for p in parkings],
        event_keep_s=st.config.event_keep_s)

    def steps() -> Steps[list[tuple[UUID, bool]]]:
        return [(r[0], r[1]) for r in (yield st.fetch("park_many", values))]

    return plan(steps, idempotent=False)


def emit(st: Statements, events: Mapping[str, Any], conn: Any = None) -> Plan[list[str]]:
    """Emit ``events`` (name to payload) in one transaction: the first emit of a name
    writes its payload, and the tasks parked on it are due now.  Returns the names this
    call emitted first.  Idempotent: run again, it emits nothing more."""
    if not isinstance(events, Mapping):
        raise InvalidTask(f"events are a mapping of names to payloads, got {events!r:.80}")
    if not 1 <= len(events) <= MAX_EMITTED:
        raise InvalidTask(f"an emit writes 1 to {MAX_EMITTED:,} events, got {len(events):,}")
    names = [event_name(n) for n in events]
    payloads = [produce.jsonb(validate.payload_json(p, st.config.max_payload_bytes))
                for p in events.values()]
    values = st.params(names=names, payloads=payloads, keep_s=st.config.event_keep_s,
                       notify=st.config.notify)

    def writes() -> Steps[list[str]]:
        first = yield st.fetch("event_emit", values)
        yield st.fetch("event_wake", values)
        return [r[0] for r in first]

    def steps() -> Steps[list[str]]:
        first: list[str] = yield Atomic(writes)
        return first

    return plan(steps, conn)


def purge_events(st: Statements, limit: int) -> Plan[int]:
    """Delete up to ``limit`` expired events (the janitor's retention)."""
    def steps() -> Steps[int]:
        return len((yield st.fetch(st.query("events_purge", limit), st.params())))

    return plan(steps)
