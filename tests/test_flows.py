"""Task graphs ("flows") on a real database: what each node takes from the nodes it waits
for, the checks that refuse a canvas before anything is written, a caller's transaction,
cancelling a flow, and the results a flow keeps until it ends.

Nodes are driven by hand, deterministically: claimed, acked with a result as the worker
acks a flow's task (:mod:`shardq.worker.outcomes`), and folded in by
:func:`shardq.loops.resolver.resolve`; one test runs a real worker end to end.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.config import ClientConfig
from shardq.loops.resolver import purge, resolve
from shardq.ops import settle
from shardq.ops.results import Kept, encode
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.clients import Blocking
from tests.helpers import claim_all, rows

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour,
              pytest.mark.usefixtures("no_flows")]

QUEUE = "flows"

# Handlers live at the module's top level: the worker of the end-to-end test runs them.
app = shardq.App()


@app.task(queue=QUEUE)
def add(x: int, y: int = 0) -> int:
    """Return a sum."""
    return x + y


@app.task(queue=QUEUE)
def total(values: list[int], plus: int = 0) -> int:
    """Return the sum of a list (a group's results), and ``plus``."""
    return sum(values) + plus


@app.task(queue=QUEUE)
def pair(values: list[int]) -> list[int]:
    """Return the list it was given: what a step after a group takes, unchanged."""
    return values


@app.task(queue=QUEUE)
def emit(value: Any) -> Any:
    """Return its argument."""
    return value


# -- driving nodes by hand ---------------------------------------------------------------


def flow_kept(value: Any) -> Kept:
    """The result the worker keeps for a flow's task: until its flow ends."""
    return Kept.of(encode(value), float("inf"), 1_000_000)


def ack(client: shardq.Client, tasks: Sequence[shardq.Task], values: Sequence[Any]) -> None:
    """Ack ``tasks`` with ``values`` kept, as the worker acks a flow's tasks."""
    client.perform(settle.ack(client.statements, tasks, [flow_kept(v) for v in values]))


def claimed(client: shardq.Client, queue: str = QUEUE) -> dict[uuid.UUID, shardq.Task]:
    """Every due task of ``queue``, claimed, by id."""
    return {t.id: t for t in claim_all(client, queue)}


def run(client: shardq.Client, compute: Any, queue: str = QUEUE) -> dict[uuid.UUID, Any]:
    """Claim every due task, ack each with ``compute(payload)`` and fold; returns the
    payloads' args by id."""
    tasks = list(claimed(client, queue).values())
    ack(client, tasks, [compute(t.payload) for t in tasks])
    resolve(client.statements)
    return {t.id: t.payload["args"] for t in tasks}


def call(payload: dict[str, Any]) -> Any:
    """What the payload's task returns (the handlers above, called in the test)."""
    fn = {f.name: f for f in (add, total, pair, emit)}[payload["task"]]
    return fn.fn(*payload["args"], **payload["kwargs"])


# -- what nodes take ---------------------------------------------------------------------


def test_a_chain_passes_each_result_to_the_next_step(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chain(add.s(1, 2), add.s(10), add.si(100, 1),
                                              add.s()))
    assert len(handle.ids) == 4
    assert handle.result_id == handle.ids[3]
    seen: dict[uuid.UUID, Any] = {}
    for _ in range(4):
        seen.update(run(client, call))
    assert [seen[i] for i in handle.ids] == [[1, 2], [3, 10], [100, 1], [101]]
    assert client.result(handle.result_id, wait_s=0).value == 101
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.kind, flow.state, flow.counts["succeeded"]) == ("chain", "succeeded", 4)
    assert flow.finished_at is not None


def test_a_step_after_a_group_takes_its_results_in_group_order(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chain(
        emit.si(1), shardq.group(add.s(10), add.s(20), add.s(30)), pair.s()))
    run(client, call)
    members = claimed(client)
    assert set(members) == set(handle.ids[1:4])
    assert [members[i].payload["args"] for i in handle.ids[1:4]] == [[1, 10], [1, 20], [1, 30]]
    for i in reversed(handle.ids[1:4]):  # the last member first
        ack(client, [members[i]], [call(members[i].payload)])
        resolve(client.statements)
    last = run(client, call)
    assert last == {handle.ids[4]: [[11, 21, 31]]}
    assert client.result(handle.ids[4]).value == [11, 21, 31]


def test_a_chord_callback_takes_results_in_group_order(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chord([emit.si(v) for v in "abcde"], pair.s()))
    assert handle.result_id == handle.ids[-1]
    members = claimed(client)
    assert set(members) == set(handle.ids[:5])
    for i in reversed(handle.ids[:5]):  # finishing in reverse order, one fold each
        ack(client, [members[i]], [members[i].payload["args"][0]])
        resolve(client.statements)
    assert run(client, call) == {handle.ids[5]: [["a", "b", "c", "d", "e"]]}
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.kind, flow.state) == ("chord", "succeeded")


def test_a_chord_of_one_member_passes_a_list(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chord([emit.si(7)], total.s(plus=1)))
    run(client, call)
    [args] = run(client, call).values()
    assert args == [[7]]
    assert handle.result_id == handle.ids[1]
    assert client.result(handle.ids[1]).value == 8


def test_a_graph_diamond_passes_results_in_after_order(client: shardq.Client) -> None:
    graph = shardq.Graph()
    a = graph.add(emit.si(1))
    b = graph.add(add.s(10), after=[a])
    c = graph.add(add.s(20), after=[a])
    graph.add(pair.s(), after=[c, b])
    handle = client.enqueue_flow(graph)
    assert handle.result_id == handle.ids[3]
    run(client, call)
    both = claimed(client)
    ack(client, [both[handle.ids[b]]], [11])  # b first: the order given counts, not this
    resolve(client.statements)
    assert client.get(handle.ids[3]).state == "waiting"  # type: ignore[union-attr]
    ack(client, [both[handle.ids[c]]], [21])
    resolve(client.statements)
    assert run(client, call) == {handle.ids[3]: [[21, 11]]}


def test_a_groups_result_id_is_none_and_its_ids_read_back(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.group(emit.si(1), emit.si(2)))
    assert handle.result_id is None
    assert len(handle.ids) == 2
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.kind, flow.state, flow.tasks, flow.result_id) == ("group", "running", 2, None)
    assert [n.id for n in flow.nodes] == list(handle.ids)
    run(client, call)
    assert [client.result(i).value for i in handle.ids] == [1, 2]


# -- refused before anything is written --------------------------------------------------


@pytest.mark.parametrize("make", [
    pytest.param(lambda: shardq.chain(add.s(1, 2), add.s(1, 2)), id="parent-result-counts"),
    pytest.param(lambda: shardq.chain(add.s()), id="first-step-takes-nothing"),
    pytest.param(lambda: shardq.chain(add.s(1), add.s(z=3)), id="unknown-kwarg"),
    pytest.param(lambda: shardq.chain(add.s(1), add.si(1).set(key="k")), id="key"),
    pytest.param(lambda: shardq.chain(add.s(1), add.si(1).set(prio=1)), id="unknown-option"),
    pytest.param(lambda: shardq.chain(), id="empty-chain"),
    pytest.param(lambda: shardq.chain(add.s(1), "add"),  # type: ignore[arg-type]
                 id="not-a-signature"),
    pytest.param(lambda: shardq.group(add.s(1), 3),  # type: ignore[arg-type]
                 id="group-member"),
    pytest.param(lambda: _graph_after(5), id="graph-unknown-after"),
])
def test_an_invalid_canvas_is_refused_in_one_line(client: shardq.Client,
                                                  connect: psycopg.Connection[Any],
                                                  make: Any) -> None:
    with pytest.raises(shardq.InvalidTask) as raised:
        client.enqueue_flow(make())
    assert "\n" not in str(raised.value)
    assert (rows(connect, "flows"), rows(connect, "tasks")) == (0, 0)


def _graph_after(node: int) -> shardq.Graph:
    graph = shardq.Graph()
    graph.add(add.s(1))
    graph.add(add.s(), after=[node])
    return graph


def test_the_parents_result_makes_a_call_valid(client: shardq.Client) -> None:
    # add takes one or two: add.s(1) after a step is add(result, 1).
    handle = client.enqueue_flow(shardq.chain(add.s(1), add.s(1), total.si([1])))
    assert len(handle.ids) == 3


def test_a_flow_in_a_transaction_that_rolls_back_leaves_nothing(
        dsn: str, client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    canvas = shardq.chain(add.s(1), add.s(2))
    if isinstance(client, Blocking):  # an AsyncClient joins an AsyncConnection
        async def rolled_back() -> shardq.FlowHandle:
            async with shardq.AsyncClient(dsn) as aclient, \
                    await psycopg.AsyncConnection.connect(dsn) as conn:
                handle: shardq.FlowHandle = await aclient.enqueue_flow(canvas, conn=conn)
                await conn.rollback()
            return handle

        handle = asyncio.run(rolled_back())
    else:
        with psycopg.connect(dsn) as conn:
            handle = client.enqueue_flow(canvas, conn=conn)
            assert len(handle.ids) == 2
            conn.rollback()
    assert (rows(connect, "flows"), rows(connect, "tasks")) == (0, 0)
    assert client.flow(handle.id) is None


# -- cancelling --------------------------------------------------------------------------


def test_cancel_flow_cancels_what_has_not_finished(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chain(emit.si(1), shardq.group(add.s(1), add.s(2)),
                                              total.s()))
    run(client, call)
    assert client.cancel_flow(handle.id) == 3
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["succeeded"], flow.counts["cancelled"]) == (
        "cancelled", 1, 3)
    assert flow.cancelled_at is not None
    assert flow.finished_at == flow.cancelled_at
    assert claimed(client) == {}
    assert client.cancel_flow(handle.id) == 0
    unknown = uuid.uuid4()
    assert client.cancel_flow(unknown) == 0
    assert client.flow(unknown) is None


# -- results kept until the flow ends ----------------------------------------------------


def expiries(connect: psycopg.Connection[Any], ids: Sequence[uuid.UUID]) -> list[Any]:
    return [connect.execute("SELECT expires_at = 'infinity' FROM shardq.results WHERE id = %s",
                            (i,)).fetchone() for i in ids]


def test_results_are_kept_until_the_flow_ends(client: shardq.Client,
                                              connect: psycopg.Connection[Any]) -> None:
    """A flow's results are kept while it runs and for its keep_result_s after it ended;
    then the janitor deletes the flow and its results."""
    handle = client.enqueue_flow(shardq.chain(emit.si(1), add.s(1), add.s(1)),
                                 keep_result_s=3600)
    run(client, call)
    run(client, call)
    assert expiries(connect, handle.ids[:2]) == [(True,), (True,)]
    run(client, call)
    flow = client.flow(handle.id)
    assert flow is not None
    assert flow.state == "succeeded"
    assert expiries(connect, handle.ids) == [(True,)] * 3
    assert client.result(handle.ids[0]).value == 1
    st = client.statements
    for ago_s, purged in ((3590, 0), (3610, 1)):
        connect.execute("UPDATE shardq.flows SET finished_at = now() - %s * interval '1 second' "
                        "WHERE id = %s", (ago_s, handle.id))
        assert purge(st, 100) == purged
    assert client.flow(handle.id) is None
    assert [client.result(i).status for i in handle.ids] == ["unknown"] * 3


# -- end to end, on a worker -------------------------------------------------------------


def test_a_worker_runs_a_chain_and_a_chord(dsn: str, client: shardq.Client) -> None:
    app.use_client(client)
    chained = client.enqueue_flow(shardq.chain(add.s(1, 2), add.s(3), add.s()))
    chorded = client.enqueue_flow(shardq.chord([add.si(i, i) for i in range(6)],
                                               total.s(plus=1)))
    # No vacuum step: it needs a session of its own, which a transaction pooler
    # (CI runs these tests behind one) does not keep.
    worker = Worker(app, ClientConfig(dsn=dsn, vacuum=False),
                    WorkerConfig(janitors=1, listen=False, ack_flush_ms=20))
    worker.start()
    try:
        assert (chained.result_id, chorded.result_id) == (chained.ids[-1], chorded.ids[-1])
        assert client.result(chained.ids[-1], wait_s=30).value == 6
        assert client.result(chorded.ids[-1], wait_s=30).value == 31
        deadline = time.monotonic() + 30
        while client.flow(chorded.id).state != "succeeded":  # type: ignore[union-attr]
            assert time.monotonic() < deadline, client.flow(chorded.id)
            time.sleep(0.05)
    finally:
        worker.stop(grace_s=5)
    assert client.flow(chained.id).counts["succeeded"] == 3  # type: ignore[union-attr]
