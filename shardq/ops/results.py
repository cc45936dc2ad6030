"""Task results: what a task's handler returned, kept for a while after it succeeded.

A task whose handler was registered with ``keep_result_s`` leaves a row in
``shardq.results`` when it succeeds.  The worker encodes the return value
(:func:`encode`, :meth:`Kept.of`) and the ack writes it in the statement that deletes
the task (``sql/ack_results.sql``, through :func:`shardq.ops.settle.ack`), so a task is
never done without its result, and an ack run again after a lost reply writes it once.
The janitor deletes results past their expiry.

:func:`result` tells what became of a task, and can wait for it to finish.  On
PostgreSQL the ack announces each result on channel :data:`CHANNEL`: a waiting call
subscribes to its task's announcement on the client's listener (one connection that
LISTENs for every waiting call of the client, :mod:`shardq.core.listen`) and returns
as soon as it is heard.  It also looks again every :data:`RECHECK_S` (a task that dies
is not announced).  On CockroachDB, which has no LISTEN, with ``notify`` off, or through
a transaction pooler (where LISTEN cannot work), it polls: each pause is a quarter of
the time waited so far, from 10 ms up to :data:`RECHECK_S` (:func:`poll_pause_s`).
Either way each look is one short statement on a pooled connection, given back before
the call waits again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.config import DAY_S, check_setting, setting
from shardq.core.errors import InvalidTask
from shardq.core.plan import Listen, Plan, Steps, Wait, plan
from shardq.core.statements import Statements
from shardq.core.task import Task, TaskResult

CHANNEL = "shardq_results"
"""Where acks announce kept results (each notification's payload is a task id)."""
FIRST_CHECK_S = 0.01
"""The first pause of a wait that polls (CockroachDB, with ``notify`` off, or through a
transaction pooler)."""
POLL_LATE_FRACTION = 0.25
"""How late, as a share of its wait so far, a wait that polls may see a result."""
RECHECK_S = 1.0
"""The longest pause between two looks while waiting."""
NOT_KEPT = "not kept: "
"""How the error of a succeeded task whose return value could not be kept begins."""

Encoded = tuple[str | None, str | None]
"""A return value as JSON text, or None and why it cannot be kept."""


@dataclass(frozen=True)
class Retention:
    """The range a task's ``keep_result_s`` must lie in, checked as the settings are."""

    keep_result_s: float | None = setting(
        None, "seconds a task's result is kept after it succeeded (none: not kept)",
        low=1, high=validate.MAX_DELAY_S)


def keep_result_s(value: float | None, label: str) -> float | None:
    """``value`` as a task's retention of results, or ConfigError naming ``label``."""
    check_setting(Retention, "keep_result_s", value, label)
    return None if value is None else float(value)


def encode(value: Any) -> Encoded:
    """What a handler returned, as the JSON text a result keeps; a value the database
    cannot hold as JSON (not serialisable, NaN, a NUL in a string) gives the reason
    instead, so the task still succeeds and its result says why it has no value."""
    try:
        return validate.payload_json(value, validate.MAX_PAYLOAD_BYTES), None
    except InvalidTask as exc:
        return None, NOT_KEPT + "the return value " + str(exc).removeprefix("payload ")


@dataclass(frozen=True, slots=True)
class Kept:
    """A result to write with a task's ack: its JSON text (or why there is none), and
    how long to keep it."""

    value: str | None
    error: str | None
    keep_s: float

    @classmethod
    def of(cls, encoded: Encoded, keep_s: float, max_bytes: int) -> Kept:
        """The result of ``encoded``; a value over ``max_bytes`` (the payloads' limit,
        results travel in the same batches) is not kept, and the error says so."""
        text, error = encoded
        if text is not None and len(text) > max_bytes:
            return cls(None, f"{NOT_KEPT}the return value is {len(text):,} bytes of JSON, "
                             f"over max_payload_bytes ({max_bytes:,})", keep_s)
        return cls(text, error, keep_s)


def columns(tasks: Sequence[Task], kept: Sequence[Kept | None]) -> dict[str, Any]:
    """ack_results' parameters for the results of those ``tasks`` that keep one
    (``kept`` runs parallel to them)."""
    pairs = [(t.id, k) for t, k in zip(tasks, kept, strict=True) if k is not None]
    return {"kept_ids": [i for i, _ in pairs], "kept_values": [k.value for _, k in pairs],
            "kept_errors": [k.error for _, k in pairs], "keep_s": [k.keep_s for _, k in pairs]}


def result(st: Statements, task_id: UUID | str, wait_s: float = 0.0) -> Plan[TaskResult]:
    """What became of one task; with ``wait_s``, once it finished (succeeded or failed)
    or once ``wait_s`` passed, whichever comes first (see the module's docstring)."""
    tid = validate.task_id(task_id)
    wait = validate.seconds("wait_s", wait_s, limit=DAY_S) or 0.0
    if not wait:
        return plan(lambda: _look(st, tid))
    # Made once, so a retry after a lost connection does not wait afresh.
    until = time.monotonic() + wait
    if not st.listens():
        return plan(lambda: _watch(st, tid, until, None), wait_s=wait)

    def steps() -> Steps[TaskResult]:
        # Subscribed before the first look: a result announced after it is heard.
        yield Listen(CHANNEL, str(tid))
        return (yield from _watch(st, tid, until, CHANNEL))

    return plan(steps, wait_s=wait)


def _watch(st: Statements, tid: UUID, until: float, channel: str | None
           ) -> Steps[TaskResult]:
    """Look until the task finished or ``until`` (a monotonic time) passed, waiting in
    between for its announcement on ``channel`` (None: only a pause)."""
    began = time.monotonic()
    while True:
        found = yield from _look(st, tid)
        now = time.monotonic()
        left = until - now
        if found.finished or left <= 0:
            return found
        yield Wait(min(left, RECHECK_S if channel else poll_pause_s(now - began)), channel,
                   str(tid))


def poll_pause_s(waited_s: float) -> float:
    """The pause before the next look of a wait that polls, having waited ``waited_s``: a
    quarter of that, from :data:`FIRST_CHECK_S` up to :data:`RECHECK_S`.  A result is then
    seen at most a quarter of its wait late (pauses that doubled saw it up to twice its
    wait late: a task done in 0.33 s was seen at 0.63 s), for about 20 looks in the first
    second of a wait where doubling made 7, and one a second after 4 s."""
    return min(RECHECK_S, max(FIRST_CHECK_S, waited_s * POLL_LATE_FRACTION))


def _look(st: Statements, tid: UUID) -> Steps[TaskResult]:
    """One look at the task: its kept result, or its row's state, or neither."""
    rows = yield st.fetch("result", {"id": tid})
    if not rows:
        return TaskResult(tid, "unknown")
    # A kept result and a row of the same id would be a task enqueued again under the
    # id of a finished one: its row is what it is now.
    status, queue, value, error, attempts, enqueued_at, finished_at = min(
        rows, key=lambda row: row[0] == "succeeded")
    return TaskResult(tid, status, value, error, attempts, enqueued_at, finished_at, queue)
