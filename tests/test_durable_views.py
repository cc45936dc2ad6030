"""What shows a durable task, on both clients: its record (``get``) lists its checkpointed
steps and what it waits for, its state reads ``parked``, and the queue figures count it
apart from the scheduled tasks, by reason.  The tasks are parked by a real worker
(:mod:`tests.durable_views_kit`)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

import shardq
from shardq.ops import inspection
from shardq.ops.durable import NEVER
from shardq.text import durable
from tests.durable_views_kit import IDLE, QUEUE, app, approval, napper, parent, park
from tests.flows_kit import running
from tests.helpers import shardq_cli

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]


@pytest.fixture
def blocking(client: shardq.Client, dsn: str) -> Iterator[shardq.Client]:
    """A Client for the handlers' enqueues (after `client` emptied the tables)."""
    with shardq.Client(dsn) as c:
        app.use_client(c)
        yield c


def test_a_parked_task_shows_its_steps_and_what_it_waits_for(
        client: shardq.Client, blocking: shardq.Client, dsn: str) -> None:
    order = uuid.uuid4().hex
    task_id = approval.enqueue(order)
    enqueued = blocking.get(task_id)
    assert enqueued is not None
    assert (enqueued.steps, enqueued.waiting_for) == ((), None)  # not durable yet
    park(dsn, client, {task_id: "event"})
    info = client.get(task_id)
    assert info is not None
    assert (info.status, info.state) == ("available", "parked")
    assert info.waiting_for is not None
    assert (info.waiting_for.reason, info.waiting_for.event) == ("event", f"approved:{order}")
    # The deadline is the wait's, an hour after it began, and the task wakes then.
    assert info.waiting_for.until == info.exec_time
    assert info.waiting_for.until > enqueued.enqueued_at + timedelta(minutes=59)
    assert [(s.name, s.kind, s.state, s.value) for s in info.steps] == [
        ("price", "step", "done", {"order": order, "total": 42}),
        ("cool-off", "sleep", "done", None),
        ("approval", "event", "waiting", {"event": f"approved:{order}"})]
    price, nap, wait = info.steps
    assert price.until is None
    assert nap.until is not None
    assert nap.until < wait.at
    assert wait.until == info.waiting_for.until
    assert price.at <= nap.at <= wait.at  # in the order they were written
    # Each park is an attempt of its own, saying what the task waited for.
    assert [h.outcome for h in info.history] == ["parked", "parked"]
    assert info.history[0].error is not None
    assert info.history[1].error is not None
    assert info.history[0].error.startswith("sleep 'cool-off' until ")
    assert info.history[1].error.startswith(f"wait_event 'approval' for 'approved:{order}'")
    # Once it has what it waited for it runs to its end, and its record is gone.
    assert client.emit_event(f"approved:{order}", {"by": "ada"}) is True
    with running(dsn, app):
        assert client.result(task_id, wait_s=60).value == {"by": "ada"}
    assert client.get(task_id) is None


def test_sleeps_children_and_waits_without_a_deadline(
        client: shardq.Client, blocking: shardq.Client, dsn: str) -> None:
    forever = approval.enqueue(uuid.uuid4().hex, None)
    sleeping = napper.enqueue("n-1")
    waiting = parent.enqueue()
    later = client.enqueue(QUEUE, {"plain": True}, delay_s=3600)
    park(dsn, client, {forever: "event", sleeping: "sleep", waiting: "children"})
    infos = {t: client.get(t) for t in (forever, sleeping, waiting, later)}
    never, nap, kids, plain = (infos[t] for t in (forever, sleeping, waiting, later))
    assert never is not None
    assert nap is not None
    assert kids is not None
    assert plain is not None
    # Without a deadline the task stands in line at the end of time, and says so.
    assert never.waiting_for is not None
    assert (never.waiting_for.until, never.exec_time) == (None, NEVER)
    assert never.steps[-1].until is None
    assert nap.waiting_for == shardq.Waiting("sleep", None, nap.exec_time)
    assert [(s.name, s.kind, s.state) for s in nap.steps] == [("price", "step", "done"),
                                                               ("nap", "sleep", "waiting")]
    assert nap.steps[-1].until == nap.exec_time
    assert kids.waiting_for == shardq.Waiting("children", None, kids.exec_time)
    spawned, waited = kids.steps
    assert (spawned.name, spawned.kind, spawned.state) == ("kid", "spawn", "done")
    assert (waited.name, waited.kind, waited.state) == ("kids", "wait", "waiting")
    assert waited.value == {"children": [spawned.value]}
    child = client.get(spawned.value)
    assert child is not None
    assert child.queue == IDLE
    assert child.state == "available"
    # A plain task waiting for its time is scheduled, not parked.
    assert (plain.state, plain.waiting_for, plain.steps) == ("scheduled", None, ())
    # The queue's figures count the parked tasks apart, by reason.
    stats = client.stats(QUEUE)
    assert (stats["scheduled"], stats["parked"]) == (1, 3)
    assert stats["parked_by"] == {"sleep": 1, "event": 1, "children": 1}
    assert {"scheduled", "parked"} <= set(stats["exact"])
    # Task lists (the dashboard's) show the state and the wait too; only get reads steps.
    st = blocking.statements
    listed = {t.id: t for t in st.perform(inspection.tasks(st, QUEUE, "available", 10))}
    assert (listed[sleeping].state, listed[sleeping].waiting_for) == ("parked",
                                                                      nap.waiting_for)
    assert listed[sleeping].steps == ()


def test_a_woken_task_is_available_until_claimed(client: shardq.Client,
                                                 blocking: shardq.Client, dsn: str) -> None:
    order = uuid.uuid4().hex
    task_id = approval.enqueue(order)
    park(dsn, client, {task_id: "event"})
    client.emit_event(f"approved:{order}", "yes")  # no worker runs: it stays woken
    info = client.get(task_id)
    assert info is not None
    assert (info.state, info.waiting_for) == ("available", None)
    assert len(info.steps) == 3  # its steps stay until it succeeds
    stats = client.stats(QUEUE)
    assert (stats["available"], stats["parked"]) == (1, 0)


@pytest.mark.blocking_client  # the command line reads with a Client of its own
def test_task_show_lists_the_steps_the_wait_and_the_woken_run(
        client: shardq.Client, blocking: shardq.Client, dsn: str) -> None:
    order = "o-" + "x" * 80  # a value longer than the terminal shows
    task_id = approval.enqueue(order)
    park(dsn, client, {task_id: "event"})
    info = client.get(task_id)
    assert info is not None
    assert info.waiting_for is not None
    assert info.waiting_for.until is not None
    shown = shardq_cli("task", "show", str(task_id), "--dsn", dsn).stdout
    record, _, rest = shown.partition("\nsteps:\n")
    steps, _, attempts = rest.partition("\nattempts:\n")
    fields = dict(line.strip().split(": ", 1) for line in record.splitlines())
    assert fields["state"] == "parked"
    assert fields["waiting_for"] == f"event 'approved:{order}' until {info.waiting_for.until}"
    assert "steps" not in fields
    rows = [re.split(r"\s{2,}", line) for line in steps.splitlines()]
    assert rows[0] == ["name", "kind", "state", "until", "value"]
    assert [row[:3] for row in rows[1:]] == [["price", "step", "done"],
                                             ["cool-off", "sleep", "done"],
                                             ["approval", "event", "waiting"]]
    assert rows[1][3] == "-"
    assert rows[3][3] == info.waiting_for.until.isoformat(timespec="seconds")
    price = rows[1][4]
    assert price.startswith('{"order":"o-xxx')
    assert price.endswith("…")
    assert len(price) == durable.VALUE_WIDTH
    # The first run parked on the sleep; the second, woken, parked on the event.
    header, *lines = attempts.splitlines()
    column = header.index("outcome")
    runs = [(line[:4].strip(), line[column:].split("  ")[0]) for line in lines
            if line[:4].strip().isdigit()]
    assert runs == [("1", "parked"), ("2", "woken, parked")]
    assert "sleep 'cool-off' until " in attempts
    assert f"wait_event 'approval' for 'approved:{order}'" in attempts
