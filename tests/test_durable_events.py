"""Events of durable tasks through both clients: the first emit wins, an emit is
idempotent, one in the caller's transaction counts only once committed, and an emit wakes
the tasks parked on its event, however the park and the emit cross."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import shardq
from shardq.loops.janitor import janitor_pass
from shardq.ops import durable
from shardq.ops.durable import Parking
from tests import durable_kit

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

QUEUE = "events"


def name() -> str:
    return f"ev-{uuid.uuid4().hex}"


def parked_row(connect: psycopg.Connection[Any], task_id: Any) -> tuple[Any, ...]:
    row = connect.execute("SELECT status, parked, wait_event, exec_time, attempts "
                          "FROM shardq.tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None
    return tuple(row)


def park_on(client: Any, event: str, until: datetime | None = None) -> shardq.Task:
    """A task claimed and parked on ``event`` (as a worker parks a durable task)."""
    client.enqueue(QUEUE, {})
    [task] = client.claim(QUEUE, limit=1)
    st = client.statements
    parked = st.perform(durable.park(st, [task], [Parking("event", until, event=event)]))
    assert [i for i, _due in parked] == [task.id]
    claimed: shardq.Task = task
    return claimed


def test_the_first_emit_wins_and_an_emit_is_idempotent(client: Any,
                                                       connect: psycopg.Connection[Any]) -> None:
    event = name()
    assert client.emit_event(event, {"approved": True}) is True
    assert client.emit_event(event, {"approved": False}) is False
    assert connect.execute("SELECT payload FROM shardq.events WHERE name = %s",
                           (event,)).fetchone() == ({"approved": True},)


def test_emit_events_returns_the_names_emitted_first(client: Any) -> None:
    old, new = name(), name()
    client.emit_event(old, 1)
    assert client.emit_events({old: 2, new: 3}) == [new]


@pytest.mark.parametrize("bad", ["", "x" * 513, 5, None])
def test_a_bad_event_name_is_refused_in_one_line(client: Any, bad: Any) -> None:
    with pytest.raises(shardq.InvalidTask, match="an event's name is text") as caught:
        client.emit_event(bad, 1)
    assert "\n" not in str(caught.value)


def test_a_payload_that_is_not_json_is_refused(client: Any) -> None:
    with pytest.raises(shardq.InvalidTask, match="not JSON-serialisable"):
        client.emit_event(name(), object())


def test_an_emit_in_a_transaction_counts_once_committed(client: Any, dsn: str,
                                                        connect: psycopg.Connection[Any]) -> None:
    if not isinstance(client, shardq.Client):
        pytest.skip("a caller's connection is the blocking client's here (psycopg's "
                    "AsyncConnection is covered by the plan, which both run alike)")
    rolled, kept = name(), name()
    with psycopg.connect(dsn) as conn:
        client.emit_event(rolled, 1, conn=conn)
        conn.rollback()
        client.emit_event(kept, 2, conn=conn)
        conn.commit()
    found = connect.execute("SELECT name FROM shardq.events WHERE name = ANY(%s)",
                            ([rolled, kept],)).fetchall()
    assert found == [(kept,)]


def test_an_emit_wakes_the_task_parked_on_it(client: Any,
                                             connect: psycopg.Connection[Any]) -> None:
    event = name()
    task = park_on(client, event)
    status, parked, waits_for, exec_time, attempts = parked_row(connect, task.id)
    # Parked: back in line at 'infinity' (no deadline), the attempt taken back.
    assert (status, parked, waits_for, attempts) == ("available", "event", event, 0)
    assert exec_time == durable.NEVER
    assert client.emit_event(event, "go") is True
    assert parked_row(connect, task.id)[3] <= datetime.now(UTC)
    [again] = client.claim(QUEUE, limit=1)
    assert again.id == task.id
    assert parked_row(connect, task.id)[1] is None  # claimed: no longer parked


def test_a_park_after_the_emit_is_due_at_once(client: Any,
                                              connect: psycopg.Connection[Any]) -> None:
    """The event was emitted after the handler looked for it and before its park was
    written: the park finds the event's payload under the row's lock and is due now."""
    event = name()
    client.enqueue(QUEUE, {})
    [task] = client.claim(QUEUE, limit=1)
    client.emit_event(event, 7)
    st = client.statements
    [(task_id, due)] = st.perform(durable.park(st, [task], [Parking("event", None,
                                                                    event=event)]))
    assert (task_id, due) == (task.id, True)
    assert parked_row(connect, task.id)[3] <= datetime.now(UTC)


def test_a_park_without_the_lease_parks_nothing(client: Any) -> None:
    client.enqueue(QUEUE, {})
    [task] = client.claim(QUEUE, limit=1)
    client.cancel(task.id)
    st = client.statements
    assert st.perform(durable.park(st, [task], [Parking("sleep", None)])) == []


def test_a_durable_task_driven_by_hand_parks_and_resumes(client: Any) -> None:
    if not isinstance(client, shardq.Client):
        pytest.skip("a worker's durable calls run on its blocking client")
    durable_kit.a_durable_task_parks_and_resumes(client, QUEUE)


def test_the_janitor_deletes_events_that_expired(client: Any,
                                                 connect: psycopg.Connection[Any]) -> None:
    old, fresh = name(), name()
    client.emit_events({old: 1, fresh: 2})
    connect.execute("UPDATE shardq.events SET expires_at = now() - interval '1 s' "
                    "WHERE name = %s", (old,))
    report = janitor_pass(client.statements)
    assert report.expired_events >= 1
    left = connect.execute("SELECT name FROM shardq.events WHERE name = ANY(%s)",
                           ([old, fresh],)).fetchall()
    assert left == [(fresh,)]


def test_an_event_waited_for_without_a_deadline_expires_after_its_emit(
        client: Any, connect: psycopg.Connection[Any]) -> None:
    event = name()
    park_on(client, event)  # no deadline: its row lasts until the emit
    client.emit_event(event, 1)
    expires = connect.execute("SELECT expires_at - emitted_at FROM shardq.events "
                              "WHERE name = %s", (event,)).fetchone()
    assert expires is not None
    assert expires[0].total_seconds() == client.config.event_keep_s


def test_an_emit_completes_the_wait_of_the_task_it_wakes(client: Any,
                                                          connect: psycopg.Connection[Any]) -> None:
    """The woken task's next run finds its wait done, with the first emit's payload."""
    event = name()
    client.enqueue(QUEUE, {})
    [task] = client.claim(QUEUE, limit=1)
    st = client.statements
    st.perform(durable.save(st, task, "approval", "event", "waiting",
                            json.dumps({"event": event}), None))
    st.perform(durable.park(st, [task], [Parking("event", None, event=event)]))
    client.emit_event(event, {"by": "first"})
    client.emit_event(event, {"by": "second"})
    assert connect.execute("SELECT state, value FROM shardq.steps WHERE task_id = %s",
                           (task.id,)).fetchall() == [("done", {"by": "first"})]
