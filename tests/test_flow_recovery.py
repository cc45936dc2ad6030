"""Flows whose tasks fail: a dead task holds the tasks after it and fails its flow until
it is retried from the dead letters (the flow then runs on) or deleted from them (the
tasks after it are cancelled, all the way down); and however many resolvers fold at
once, a task that waits is released once."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Graph, InvalidTask, chain, chord, group
from shardq.loops.resolver import FoldReport, resolve
from shardq.ops import deadletters, settle
from tests.conftest import Databases
from tests.flows_kit import (
    ack_run,
    call,
    ended,
    flow_rows,
    in_state,
    kept,
    payload_of,
    run_by_hand,
    run_worker_until,
    status_of,
)
from tests.helpers import claim_all, in_threads

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

Q = "flows-failing"
app = shardq.App()
POISONED: set[str] = set()
"""Tags whose steps raise while they are listed here."""
TALLY: dict[str, str] = {}
"""Where the tally handler counts its runs: ``dsn``, a database with the table."""


@app.task(queue=Q)
def start(n: int) -> int:
    """A flow's first value."""
    return n


@app.task(queue=Q, max_attempts=1)
def step(value: int, tag: str) -> int:
    """The value plus one; raises (and so dies, at its one attempt) while ``tag`` is
    poisoned."""
    if tag in POISONED:
        raise RuntimeError(f"{tag} is poisoned")
    return value + 1


@app.task(queue=Q)
def gather(values: list[Any]) -> list[Any]:
    """The list it was given."""
    return values


@app.task(queue=Q)
def tally(values: list[Any], chord_no: int) -> int:
    """Record one run of a chord's callback, in a table of the test's."""
    with psycopg.connect(TALLY["dsn"], autocommit=True) as conn:
        conn.execute("INSERT INTO flow_tally (chord_no, n) VALUES (%s, %s)",
                     (chord_no, len(values)))
    return len(values)


@pytest.fixture(autouse=True)
def unpoisoned() -> Iterator[None]:
    POISONED.clear()
    yield
    POISONED.clear()


def tasks_of(conn: psycopg.Connection[Any], flow_id: Any) -> dict[Any, str]:
    """Each task of the flow still in shardq.tasks, and its status."""
    return dict(conn.execute("SELECT id, status FROM shardq.tasks WHERE flow_id = %s",
                             (flow_id,)).fetchall())


# -- a task that dies ---------------------------------------------------------------------


def test_a_dead_task_holds_the_flow_until_it_is_retried(
        dsn: str, client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    POISONED.add("b")
    handle = client.enqueue_flow(chain(start.si(1), step.s("b"), step.s("c"), step.s("d")))
    run_worker_until(dsn, app, in_state(client, handle.id, "failed", dead=1),
                     what="the flow to fail")
    flow = client.flow(handle.id)
    assert flow is not None
    assert flow.counts == {"waiting": 2, "pending": 0, "running": 0, "succeeded": 1,
                           "dead": 1, "cancelled": 0}
    assert flow.finished_at is None
    assert [(n.id, n.state) for n in flow.nodes] == [
        (handle.ids[0], "succeeded"), (handle.ids[1], "dead"), (handle.ids[2], "waiting"),
        (handle.ids[3], "waiting")]
    assert "b is poisoned" in (flow.nodes[1].error or "")

    POISONED.clear()
    assert client.retry_dead([handle.ids[1]]) == [handle.ids[1]]
    assert client.flow(handle.id).state == "running"  # type: ignore[union-attr]
    run_worker_until(dsn, app, ended(client, handle.id))
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["succeeded"], flow.counts["dead"]) == ("succeeded", 4, 0)
    assert [client.result(i).value for i in handle.ids] == [1, 2, 3, 4]
    assert tasks_of(connect, handle.id) == {}


def diamond_with_a_tail(client: shardq.Client) -> shardq.FlowHandle:
    """a; x after a; y after x; z after y; w after a; v after w and z: x dies (by hand),
    a and w succeed, y, z and v wait."""
    g = Graph()
    a = g.add(start.si(1))
    x = g.add(step.s("x"), after=[a])
    y = g.add(step.s("y"), after=[x])
    z = g.add(step.s("z"), after=[y])
    w = g.add(step.s("w"), after=[a])
    g.add(gather.s(), after=[w, z])
    handle = client.enqueue_flow(g)
    ack_run(client, app, claim_all(client, Q))
    resolve(client.statements)
    second = {t.id: t for t in claim_all(client, Q)}
    assert set(second) == {handle.ids[x], handle.ids[w]}
    client.nack(second[handle.ids[x]], "x failed", dead=True)
    ack_run(client, app, [second[handle.ids[w]]])
    resolve(client.statements)
    flow = client.flow(handle.id)
    assert flow is not None
    assert flow.state == "failed"
    assert flow.counts == {"waiting": 3, "pending": 0, "running": 0, "succeeded": 2,
                           "dead": 1, "cancelled": 0}
    return handle


DROPS: dict[str, Callable[[shardq.Client, Any], Any]] = {
    "delete": lambda client, task_id: client.perform(
        deadletters.delete(client.statements, [task_id])),
    "purge": lambda client, task_id: client.purge_dead(Q),
}


@pytest.mark.parametrize("drop", list(DROPS))
def test_dropping_a_dead_task_cancels_the_tasks_after_it_all_the_way_down(
        drop: str, client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = diamond_with_a_tail(client)
    DROPS[drop](client, handle.ids[1])
    report = resolve(client.statements)
    assert report.cancelled == 3  # y, z, then v, which also waited for w
    flow = client.flow(handle.id)
    assert flow is not None
    assert flow.state == "failed"
    assert flow.counts == {"waiting": 0, "pending": 0, "running": 0, "succeeded": 2,
                           "dead": 1, "cancelled": 3}
    assert flow.finished_at is not None  # no task of it is left
    assert tasks_of(connect, handle.id) == {}
    assert resolve(client.statements) == FoldReport()


def test_a_janitor_pass_folds_the_purge_of_dead_tasks(
        dsn: str, client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = diamond_with_a_tail(client)
    # Dead for an hour, past the purging janitor's retention.
    connect.execute("UPDATE shardq.tasks SET exec_time = exec_time - interval '1 hour' "
                    "WHERE id = %s AND status = 'dead'", (handle.ids[1],))
    with shardq.Client(dsn, dead_retention_s=60) as purging:
        report = purging.run_janitor_once()
    assert (report.flow_cancelled, report.flows_finished) == (3, 1)
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"]) == ("failed", 3)
    assert flow.finished_at is not None


def test_a_cancelled_task_cancels_the_tasks_after_it(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = client.enqueue_flow(chain(start.si(1), step.s("b"), step.s("c")))
    assert client.cancel(handle.ids[0]).status == "available"
    resolve(client.statements)
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"]) == ("failed", 3)
    assert flow.finished_at is not None
    assert tasks_of(connect, handle.id) == {}


def test_a_dead_task_retried_by_hand_resumes_the_flow(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = client.enqueue_flow(chord([start.si(1), start.si(2)], gather.s()))
    first, second = sorted(claim_all(client, Q), key=lambda t: handle.ids.index(t.id))
    client.nack(first, "lost", dead=True)
    ack_run(client, app, [second])
    resolve(client.statements)
    assert client.flow(handle.id).state == "failed"  # type: ignore[union-attr]
    assert status_of(connect, handle.ids[2]) == "waiting"
    assert client.retry_dead(queue=Q) == [handle.ids[0]]
    resolve(client.statements)
    assert client.flow(handle.id).state == "running"  # type: ignore[union-attr]
    assert run_by_hand(client, app, Q) == 2
    assert client.result(handle.ids[2]).value == [1, 2]
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["succeeded"], flow.counts["dead"]) == ("succeeded", 3, 0)


# -- cancelling ---------------------------------------------------------------------------


def test_cancel_flow_cancels_every_task_left_once(client: shardq.Client,
                                                  connect: psycopg.Connection[Any]) -> None:
    handle = client.enqueue_flow(chain(start.si(1), step.s("b"), group(step.s("c"),
                                                                       step.s("d"))),
                                 keep_result_s=60)
    ack_run(client, app, claim_all(client, Q))
    resolve(client.statements)
    running = claim_all(client, Q)
    assert [t.id for t in running] == [handle.ids[1]]

    assert client.cancel_flow(handle.id) == 3  # the running task and the two waiting
    flow = client.flow(handle.id)
    assert flow is not None
    assert flow.state == "cancelled"
    assert flow.counts == {"waiting": 0, "pending": 0, "running": 0, "succeeded": 1,
                           "dead": 0, "cancelled": 3}
    assert flow.cancelled_at is not None
    assert flow.finished_at == flow.cancelled_at
    assert flow_rows(connect, handle.id) == (1, 0, 1)
    # The running task's ack finds it gone, and keeps nothing.
    ack_run(client, app, running)
    resolve(client.statements)
    assert client.result(handle.ids[1]).status == "unknown"
    assert client.cancel_flow(handle.id) == 0
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"]) == ("cancelled", 3)


def test_cancel_flow_cancels_a_failed_flows_dead_task_too(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = diamond_with_a_tail(client)
    assert client.cancel_flow(handle.id) == 4  # x, dead, and y, z and v, waiting
    assert tasks_of(connect, handle.id) == {}
    assert client.dead(Q) == []
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"]) == ("cancelled", 4)


def test_cancel_flow_leaves_an_ended_flow_and_unknown_ids_alone(
        client: shardq.Client) -> None:
    handle = client.enqueue_flow(chain(start.si(1), step.s("b")))
    run_by_hand(client, app, Q)
    assert client.cancel_flow(handle.id) == 0
    assert client.flow(handle.id).state == "succeeded"  # type: ignore[union-attr]
    unknown = uuid.uuid4()
    assert client.cancel_flow(unknown) == 0
    assert client.cancel_flow(str(unknown)) == 0
    assert client.flow(unknown) is None
    with pytest.raises(InvalidTask):
        client.flow("not-a-flow")


def test_cancel_flow_leaves_a_flow_whose_last_task_ended_before_its_fold(
        client: shardq.Client) -> None:
    handle = client.enqueue_flow(chain(start.si(1), step.s("b")))
    ack_run(client, app, claim_all(client, Q))
    resolve(client.statements)
    ack_run(client, app, claim_all(client, Q))  # its event is not folded in yet
    assert client.cancel_flow(handle.id) == 0
    resolve(client.statements)
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["succeeded"], flow.cancelled_at) == ("succeeded", 2, None)
    assert flow.finished_at is not None


def test_purging_a_queue_cancels_the_tasks_after_those_purged(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = client.enqueue_flow(chain(start.si(1), step.s("b"), step.s("c")))
    assert client.purge(Q) == 1  # the first task: the others wait, outside the queue
    resolve(client.statements)
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"]) == ("failed", 3)
    assert flow.finished_at is not None
    assert tasks_of(connect, handle.id) == {}


# -- released once, whoever folds ---------------------------------------------------------


def test_concurrent_acks_and_folds_release_a_callback_once(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    chords = [client.enqueue_flow(chord([start.si(i) for i in range(8)], gather.s()))
              for _ in range(5)]
    members = {t.id: t for t in claim_all(client, Q)}
    assert len(members) == 40
    last_two: list[list[shardq.Task]] = [[], []]
    early: list[shardq.Task] = []
    for handle in chords:
        tasks = [members[i] for i in handle.ids[:-1]]
        early += tasks[:6]
        last_two[0].append(tasks[6])
        last_two[1].append(tasks[7])
    ack_run(client, app, early)
    resolve(client.statements)

    # The last two members of every chord are acked at the same moment, from two threads,
    # then four resolvers fold at once.
    gate = threading.Barrier(2)

    def ack(tasks: list[shardq.Task]) -> None:
        values = [kept(call(app, t)) for t in tasks]
        gate.wait()
        client.perform(settle.ack(client.statements, tasks, values))

    assert in_threads(lambda: ack(last_two[0]), lambda: ack(last_two[1])) == []
    reports: list[FoldReport] = []
    folds = threading.Barrier(4)

    def fold() -> None:
        folds.wait()
        reports.append(resolve(client.statements))

    assert in_threads(*[fold] * 4) == []
    assert sum(r.released for r in reports) == 5
    assert resolve(client.statements).released == 0
    for handle in chords:
        callback = handle.ids[-1]
        assert status_of(connect, callback) == "available"
        assert client.get(callback).waits is None  # type: ignore[union-attr]
        assert payload_of(connect, callback)["args"] == [list(range(8))]
        assert client.flow(handle.id).counts["succeeded"] == 8  # type: ignore[union-attr]

    callbacks = claim_all(client, Q)
    assert sorted(t.id for t in callbacks) == sorted(h.ids[-1] for h in chords)
    ack_run(client, app, callbacks)
    assert in_threads(*[lambda: resolve(client.statements)] * 3) == []
    assert claim_all(client, Q) == []
    for handle in chords:
        flow = client.flow(handle.id)
        assert flow is not None
        assert (flow.state, flow.counts["succeeded"]) == ("succeeded", 9)
        assert client.result(handle.ids[-1]).value == list(range(8))


@pytest.fixture
def tallied(dsn: str, databases: Databases) -> Iterator[psycopg.Connection[Any]]:
    """The tally handler's table, empty, and a connection to read it."""
    TALLY["dsn"] = databases.direct(dsn)
    with psycopg.connect(TALLY["dsn"], autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS flow_tally (chord_no int, n int)")
        conn.execute("TRUNCATE flow_tally")
        yield conn


def test_workers_with_resolvers_of_their_own_run_each_callback_once(
        dsn: str, client: shardq.Client, tallied: psycopg.Connection[Any]) -> None:
    chords = [client.enqueue_flow(chord([start.si(i) for i in range(6)], tally.s(no)))
              for no in range(12)]

    def all_ended() -> bool:
        # A resolver of the test's own folds beside the workers' two.
        resolve(client.statements)
        return all(ended(client, h.id)() for h in chords)

    run_worker_until(dsn, app, all_ended, count=2)
    runs = tallied.execute("SELECT chord_no, count(*), min(n) FROM flow_tally "
                           "GROUP BY chord_no ORDER BY chord_no").fetchall()
    assert runs == [(no, 1, 6) for no in range(12)]
    for handle in chords:
        assert flow_rows(tallied, handle.id) == (1, 0, 7)
