"""Flows of tasks: chains, groups, chords and graphs pass each task what the tasks it
waits for returned, in the order the canvas gives; a bad canvas is refused before
anything is written; a flow joins a caller's transaction; a flow is cancelled whole;
the results its tasks pass on are kept until it ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Graph, InvalidTask, chain, chord, group
from shardq.loops.resolver import resolve
from tests.flows_kit import (
    ack_run,
    ended,
    flow_rows,
    payload_of,
    run_by_hand,
    run_worker_until,
    status_of,
    written_rows,
)
from tests.helpers import claim_all, scalar

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

Q = "flows"
app = shardq.App()


@app.task(queue=Q)
def add(x: int, y: int) -> int:
    """A sum."""
    return x + y


@app.task(queue=Q)
def echo(*args: Any) -> list[Any]:
    """Exactly the arguments it was given."""
    return list(args)


@app.task(queue=Q)
def tagged(value: Any, tag: str, delay_s: float = 0.0) -> str:
    """``value`` labelled, after a pause (so that tasks side by side end out of order)."""
    time.sleep(delay_s)
    return f"{tag}:{value}"


@app.task(queue=Q)
def collect(values: list[Any], *extra: Any) -> dict[str, Any]:
    """The list it was given, and what came after it."""
    return {"values": values, "extra": list(extra)}


def results(client: shardq.Client, ids: Any) -> list[Any]:
    """The kept values of tasks ``ids``, each one succeeded."""
    found = [client.result(i) for i in ids]
    assert [r.status for r in found] == ["succeeded"] * len(found), found
    return [r.value for r in found]


# -- chains -------------------------------------------------------------------------------


def test_a_chain_passes_each_result_to_the_next_step(dsn: str, client: shardq.Client) -> None:
    handle = client.enqueue_flow(chain(add.s(1, 2), add.s(10), echo.si("fresh"), echo.s("x")),
                                 name="arithmetic")
    assert len(handle.ids) == 4
    assert handle.result_id == handle.ids[-1]
    run_worker_until(dsn, app, ended(client, handle.id))

    # .s takes the step before's result first; .si takes nothing.
    assert results(client, handle.ids) == [3, 13, ["fresh"], [["fresh"], "x"]]
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.kind, flow.name, flow.state, flow.tasks, flow.result_id) == (
        "chain", "arithmetic", "succeeded", 4, handle.ids[-1])
    assert flow.counts == {"waiting": 0, "pending": 0, "running": 0, "succeeded": 4,
                           "dead": 0, "cancelled": 0}
    assert [n.id for n in flow.nodes] == list(handle.ids)
    assert {n.state for n in flow.nodes} == {"succeeded"}


def test_a_step_after_a_group_takes_a_list_in_the_groups_order(
        dsn: str, client: shardq.Client) -> None:
    # The first member ends last, the second first.
    members = group(tagged.s("a", 0.4), tagged.s("b"), tagged.s("c", 0.2))
    handle = client.enqueue_flow(chain(add.si(1, 1), members, collect.s("end")))
    assert handle.result_id == handle.ids[-1]
    run_worker_until(dsn, app, ended(client, handle.id))
    assert results(client, handle.ids) == [
        2, "a:2", "b:2", "c:2", {"values": ["a:2", "b:2", "c:2"], "extra": ["end"]}]


def test_nested_chains_run_as_one(client: shardq.Client) -> None:
    handle = client.enqueue_flow(
        chain(add.si(0, 1), chain(add.s(1), chain(add.s(1), add.s(1))), add.s(1)))
    assert run_by_hand(client, app, Q) == 5
    assert results(client, handle.ids) == [1, 2, 3, 4, 5]
    assert handle.result_id == handle.ids[-1]
    assert client.flow(handle.id).state == "succeeded"  # type: ignore[union-attr]


def test_a_group_of_chains_hands_on_each_chains_last_result(client: shardq.Client) -> None:
    handle = client.enqueue_flow(
        chain(add.si(1, 0), group(chain(add.s(1), add.s(1)), add.s(10)), collect.s()))
    run_by_hand(client, app, Q)
    assert results(client, handle.ids) == [1, 2, 3, 11, {"values": [3, 11], "extra": []}]


def test_one_signature_is_a_flow_of_one_task(client: shardq.Client) -> None:
    handle = client.enqueue_flow(add.s(2, 2))
    assert handle.result_id == handle.ids[0]
    run_by_hand(client, app, Q)
    assert results(client, handle.ids) == [4]
    assert client.flow(handle.id).kind == "chain"  # type: ignore[union-attr]


# -- groups and chords --------------------------------------------------------------------


def test_a_groups_members_all_run_and_it_has_no_one_result(
        dsn: str, client: shardq.Client) -> None:
    handle = client.enqueue_flow(group([add.si(1, 1), add.si(2, 2), echo.si()]))
    assert handle.result_id is None
    assert len(handle.ids) == 3
    assert client.flow(handle.id).counts["pending"] == 3  # type: ignore[union-attr]
    run_worker_until(dsn, app, ended(client, handle.id))
    assert results(client, handle.ids) == [2, 4, []]
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.kind, flow.state, flow.counts["succeeded"]) == ("group", "succeeded", 3)


def test_a_chords_callback_takes_the_results_in_the_groups_order(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = client.enqueue_flow(chord([tagged.si(i, "m") for i in range(6)], collect.s("cb")))
    callback = handle.ids[-1]
    assert handle.result_id == callback
    members = claim_all(client, Q)
    assert len(members) == 6
    # They end one at a time, last member first.
    for left, task in enumerate(sorted(members, key=lambda t: handle.ids.index(t.id),
                                       reverse=True)):
        assert status_of(connect, callback) == "waiting"
        ack_run(client, app, [task])
        resolve(client.statements)
        assert client.get(callback).waits == (5 - left or None)  # type: ignore[union-attr]
    assert status_of(connect, callback) == "available"
    assert payload_of(connect, callback)["args"] == [[f"m:{i}" for i in range(6)], "cb"]
    run_by_hand(client, app, Q)
    assert results(client, [callback]) == [{"values": [f"m:{i}" for i in range(6)],
                                            "extra": ["cb"]}]
    assert client.flow(handle.id).state == "succeeded"  # type: ignore[union-attr]


def test_a_chord_of_one_member_still_gives_a_list(client: shardq.Client) -> None:
    handle = client.enqueue_flow(chord(group(add.si(2, 3)), collect.s()))
    run_by_hand(client, app, Q)
    assert results(client, handle.ids) == [5, {"values": [5], "extra": []}]


def test_a_chord_of_chains_takes_each_chains_last_result(client: shardq.Client) -> None:
    handle = client.enqueue_flow(chord([chain(add.si(1, 1), add.s(10)),
                                        chain(add.si(2, 2), add.s(20))], collect.s()))
    firsts = claim_all(client, Q)
    assert sorted(handle.ids.index(t.id) for t in firsts) == [0, 2]
    # The second chain runs to its end before the first one starts.
    second = [t for t in firsts if t.id == handle.ids[2]]
    ack_run(client, app, second)
    resolve(client.statements)
    ack_run(client, app, claim_all(client, Q))
    resolve(client.statements)
    ack_run(client, app, [t for t in firsts if t.id == handle.ids[0]])
    resolve(client.statements)
    assert run_by_hand(client, app, Q) == 2
    assert results(client, handle.ids) == [2, 12, 4, 24, {"values": [12, 24], "extra": []}]


def test_a_chord_of_no_member_hands_its_callback_an_empty_list_at_once(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    handle = client.enqueue_flow(chord([], collect.s("none")))
    assert status_of(connect, handle.ids[0]) == "available"
    run_by_hand(client, app, Q)
    assert results(client, handle.ids) == [{"values": [], "extra": ["none"]}]
    after_empty = client.enqueue_flow(chain(group(), group(echo.s(), echo.si()), echo.s()))
    run_by_hand(client, app, Q)
    assert results(client, after_empty.ids) == [[[]], [], [[[[]], []]]]


def test_groups_within_groups_hand_on_one_flat_list(client: shardq.Client) -> None:
    handle = client.enqueue_flow(
        chain(add.si(1, 1), group(group(add.s(1), add.s(2)), add.s(3)), collect.s()))
    run_by_hand(client, app, Q)
    assert results(client, handle.ids)[-1] == {"values": [3, 4, 5], "extra": []}


def test_a_chords_callback_may_be_a_chain_or_a_group(client: shardq.Client) -> None:
    chained = client.enqueue_flow(chord([add.si(1, 1), add.si(2, 2)],
                                        chain(collect.s(), echo.s())))
    assert chained.result_id == chained.ids[-1]
    grouped = client.enqueue_flow(chord([add.si(1, 1), add.si(2, 2)],
                                        group(collect.s(), echo.s())))
    assert grouped.result_id is None
    run_by_hand(client, app, Q)
    values = {"values": [2, 4], "extra": []}
    assert results(client, chained.ids) == [2, 4, values, [values]]
    assert results(client, grouped.ids) == [2, 4, values, [[2, 4]]]


def test_a_large_chord_of_mixed_options_keeps_the_groups_order(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    # Members that share their options are written together (with COPY from 32 on); the
    # others one by one: the callback's list follows the group whatever the writing.
    members = [tagged.si(i, "m").set(priority=60) if i % 10 == 5 else tagged.si(i, "m")
               for i in range(60)]
    handle = client.enqueue_flow(chord(members, collect.s()))
    tasks = claim_all(client, Q)
    assert len(tasks) == 60
    for task in reversed(tasks):
        ack_run(client, app, [task])
    resolve(client.statements)
    assert payload_of(connect, handle.ids[-1])["args"] == [[f"m:{i}" for i in range(60)]]


# -- graphs -------------------------------------------------------------------------------


def test_a_diamond_takes_its_parents_results_in_the_order_after_names_them(
        client: shardq.Client) -> None:
    g = Graph()
    a = g.add(add.si(1, 1))
    b = g.add(add.s(10), after=[a])
    c = g.add(add.s(100), after=[a])
    d = g.add(collect.s("d"), after=[c, b])
    handle = client.enqueue_flow(g)
    assert handle.result_id == handle.ids[d]
    assert run_by_hand(client, app, Q) == 4
    # One parent: its value; several: a list, as after= orders them.
    assert results(client, handle.ids) == [2, 12, 102, {"values": [102, 12], "extra": ["d"]}]
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.kind, flow.state, flow.counts["succeeded"]) == ("graph", "succeeded", 4)


def test_a_graph_with_several_ends_has_no_one_result_and_hands_a_list_on(
        client: shardq.Client) -> None:
    g = Graph()
    root = g.add(add.si(1, 2))
    g.add(add.s(1), after=[root])
    g.add(echo.si("side"))
    assert client.enqueue_flow(g).result_id is None
    handle = client.enqueue_flow(chain(g, collect.s()))
    run_by_hand(client, app, Q)
    assert results(client, handle.ids) == [3, 4, ["side"], {"values": [4, ["side"]],
                                                            "extra": []}]


@pytest.mark.parametrize("after", [[1], [-1], [0, 0], [True], ["0"]])
def test_a_graph_refuses_after_naming_no_earlier_node_once(after: list[Any],
                                                           client: shardq.Client) -> None:
    g = Graph()
    g.add(add.si(1, 1))
    with pytest.raises(InvalidTask) as refused:
        g.add(add.s(1), after=after)
    assert "\n" not in str(refused.value)
    assert len(g.nodes) == 1


def test_a_graph_cannot_follow_a_step(client: shardq.Client) -> None:
    g = Graph()
    g.add(add.si(1, 1))
    with pytest.raises(InvalidTask, match="a graph cannot follow another step"):
        client.enqueue_flow(chain(add.si(1, 1), g))


# -- validation ---------------------------------------------------------------------------


# What a call refused does (given the client's enqueue_flow), and words its error says.
REFUSALS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "too many arguments with the result taken": (
        lambda enqueue: enqueue(chain(add.si(1, 2), add.s(1, 2))),
        f"task 1 of the flow ({add.name}.s(1, 2)): {add.name}(x, y): "
        "too many positional arguments"),
    "a first step takes nothing": (lambda enqueue: enqueue(add.s(1)), "task 0 of the flow"),
    "an immutable step takes nothing": (
        lambda enqueue: enqueue(chain(add.si(1, 2), add.si(1))), "task 1 of the flow"),
    "unknown keyword": (lambda enqueue: enqueue(chain(add.si(1, 2), add.s(z=1))), "task 1"),
    "a callback that takes no list": (
        lambda enqueue: enqueue(chord([add.si(1, 1)], add.s(1, 2))), "task 1 of the flow"),
    "an argument that is not JSON": (lambda enqueue: enqueue(echo.si(object())), "task 0"),
    "key": (lambda enqueue: add.s(1).set(key="k"), "takes no key"),
    "unknown option": (lambda enqueue: add.s(1).set(retries=3), "unknown option(s) retries"),
    "bad priority": (lambda enqueue: enqueue(add.si(1, 1).set(priority="high")), "priority"),
    "bad queue": (lambda enqueue: enqueue(add.si(1, 1).set(queue="no queue!")), "task 0"),
    "bad max_attempts": (lambda enqueue: enqueue(add.si(1, 1).set(max_attempts=0)),
                         "max_attempts"),
    "bad delay": (lambda enqueue: enqueue(add.si(1, 1).set(delay_s=-1)), "delay_s"),
    "empty chain": (lambda enqueue: chain(), "at least one step"),
    "a function in a chain": (lambda enqueue: chain(add, add.s()),  # type: ignore[arg-type]
                              "takes signatures"),
    "a number in a group": (lambda enqueue: group(1, add.si(1, 1)),  # type: ignore[arg-type]
                            "takes signatures"),
    "a function as callback": (lambda enqueue: chord([add.si(1, 1)], add),  # type: ignore[arg-type]
                               "takes signatures"),
    "a graph's node not a signature": (
        lambda enqueue: Graph().add(chain(add.si(1, 1))),  # type: ignore[arg-type]
        "a graph's node is a signature"),
    "not a canvas": (lambda enqueue: enqueue([add.si(1, 1)]), "not a signature nor a canvas"),
    "an empty group": (lambda enqueue: enqueue(group()), "no task"),
    "keep_result_s zero": (lambda enqueue: enqueue(add.si(1, 1), keep_result_s=0),
                           "keep_result_s"),
    "keep_result_s negative": (lambda enqueue: enqueue(add.si(1, 1), keep_result_s=-5),
                               "keep_result_s"),
    "keep_result_s text": (lambda enqueue: enqueue(add.si(1, 1), keep_result_s="1h"),
                           "keep_result_s"),
    "empty name": (lambda enqueue: enqueue(add.si(1, 1), name=""), "name"),
    "long name": (lambda enqueue: enqueue(add.si(1, 1), name="n" * 257), "name"),
    "name not text": (lambda enqueue: enqueue(add.si(1, 1), name=7), "name"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_bad_canvas_is_refused_in_one_line_and_nothing_is_written(
        case: str, client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    make, words = REFUSALS[case]
    before = written_rows(connect)
    with pytest.raises(InvalidTask) as refused:
        make(client.enqueue_flow)
    message = str(refused.value)
    assert "\n" not in message
    assert words in message
    assert written_rows(connect) == before


# -- a caller's transaction ---------------------------------------------------------------


@pytest.mark.blocking_client
def test_a_flow_joins_the_callers_transaction(dsn: str, client: shardq.Client,
                                              connect: psycopg.Connection[Any]) -> None:
    canvas = chain(add.si(1, 1), group(add.s(1), add.s(2)), collect.s())
    with psycopg.connect(dsn) as conn:
        dropped = client.enqueue_flow(canvas, conn=conn)
        assert flow_rows(conn, dropped.id) == (1, 4, 0)  # seen inside the transaction
        conn.rollback()
        kept = client.enqueue_flow(canvas, conn=conn)
        assert flow_rows(connect, kept.id) == (0, 0, 0)  # not committed yet
        conn.commit()
    assert flow_rows(connect, dropped.id) == (0, 0, 0)
    assert client.flow(dropped.id) is None
    assert flow_rows(connect, kept.id) == (1, 4, 0)
    run_by_hand(client, app, Q)
    assert results(client, kept.ids)[-1] == {"values": [3, 4], "extra": []}


@pytest.mark.blocking_client
def test_a_flow_joins_an_async_callers_transaction(dsn: str, client: shardq.Client,
                                                   connect: psycopg.Connection[Any]) -> None:
    async def enqueue_then_roll_back() -> shardq.FlowHandle:
        async with (shardq.AsyncClient(dsn) as aclient,
                    await psycopg.AsyncConnection.connect(dsn) as conn):
            handle: shardq.FlowHandle = await aclient.enqueue_flow(
                chain(add.si(1, 1), add.s(1)), conn=conn)
            await conn.rollback()
            return handle

    handle = asyncio.run(enqueue_then_roll_back())
    assert flow_rows(connect, handle.id) == (0, 0, 0)


# -- results ------------------------------------------------------------------------------


def expiries(conn: psycopg.Connection[Any], ids: Any) -> list[Any]:
    """When the results of tasks ``ids`` expire (None: never, while their flow runs)."""
    return [scalar(conn, "SELECT CASE WHEN isfinite(expires_at) THEN expires_at END "
                         "FROM shardq.results WHERE id = %s", (i,)) for i in ids]


def test_a_flows_results_stay_while_it_runs_and_go_keep_result_s_after_it_ends(
        timed: shardq.Client, clock: shardq.ManualClock,
        connect: psycopg.Connection[Any]) -> None:
    handle = timed.enqueue_flow(chain(add.si(1, 1), group(add.s(1), add.s(2)), collect.s()),
                                keep_result_s=300)
    ack_run(timed, app, claim_all(timed, Q))
    resolve(timed.statements)
    # Longer than keep_result_s, but the flow runs: its result is kept for the tasks after it.
    clock.advance(3600)
    timed.run_janitor_once()
    assert expiries(connect, handle.ids[:1]) == [None]
    assert run_by_hand(timed, app, Q) == 3
    flow = timed.flow(handle.id)
    assert flow is not None
    assert flow.finished_at == clock.now()
    clock.advance(299)
    timed.run_janitor_once()
    assert results(timed, handle.ids) == [2, 3, 4, {"values": [3, 4], "extra": []}]
    clock.advance(2)
    timed.run_janitor_once()
    assert timed.flow(handle.id) is None
    assert [timed.result(i).status for i in handle.ids] == ["unknown"] * 4
    assert flow_rows(connect, handle.id) == (0, 0, 0)


def test_a_cancelled_flows_results_go_keep_result_s_after_it(
        timed: shardq.Client, clock: shardq.ManualClock) -> None:
    handle = timed.enqueue_flow(chain(add.si(1, 1), add.s(1)), keep_result_s=90)
    ack_run(timed, app, claim_all(timed, Q))
    resolve(timed.statements)
    assert timed.cancel_flow(handle.id) == 1
    clock.advance(89)
    timed.run_janitor_once()
    assert results(timed, handle.ids[:1]) == [2]
    clock.advance(2)
    timed.run_janitor_once()
    assert timed.flow(handle.id) is None
    assert timed.result(handle.ids[0]).status == "unknown"
