"""A durable task driven by hand, as a worker drives it: claimed, its handler called with
a context bound, its park written, woken by an emit, claimed again.  Shared by the test on
the local server and the one on a CockroachDB cluster (``SHARDQ_TEST_CRDB_DSN``)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import shardq
from shardq.durable import Park
from shardq.handler import Context, bind, unbind
from shardq.ops import durable, settle
from tests.helpers import claim_all

calls: Counter[str] = Counter()


def counted(label: str, value: Any) -> Any:
    calls[label] += 1
    return value


def approve(event: str) -> Any:
    """A durable handler: a step, then the event's payload."""
    ctx = shardq.current()
    order = ctx.step("charge", counted, "charge", 42)
    return [order, ctx.wait_event("approval", event, 600)]


def run(client: shardq.Client, task: shardq.Task, event: str) -> Any:
    """Call the handler for ``task`` with a worker's context; a park is written and
    returns None."""
    context = Context(task, client=client)
    token = bind(context)
    parking = None
    try:
        value = approve(event)
    except Park as park:
        parking = park.parking
    finally:
        unbind(token)
    if parking is not None:
        st = client.statements
        assert st.perform(durable.park(st, [task], [parking])) == [(task.id, False)]
        return None
    client.perform(settle.ack(client.statements, [task], [None]))
    return value


def a_durable_task_parks_and_resumes(client: shardq.Client, queue: str) -> None:
    """Steps once, parks on an event (holding nothing), resumes on the emit, and its
    checkpoints go with its ack."""
    calls.clear()
    event = f"approve-{uuid.uuid4().hex}"
    task_id = client.enqueue(queue, {})
    [task] = claim_all(client, queue)
    assert run(client, task, event) is None  # parked
    assert claim_all(client, queue) == []  # not due: outside every claim's range
    assert client.emit_event(event, {"ok": True}) is True
    [again] = claim_all(client, queue)
    assert again.id == task_id
    assert again.attempts == 1  # the park took its attempt back
    assert run(client, again, event) == [42, {"ok": True}]
    assert calls["charge"] == 1  # replayed from its checkpoint
    rows = client.statements.all("steps_load", {"id": task_id})
    assert [r[1] for r in rows] == [None]  # the ack deleted the checkpoints
