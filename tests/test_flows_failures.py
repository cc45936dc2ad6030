"""Flows whose tasks fail: a dead node holds the nodes after it (the flow ``failed``),
retrying it from the dead letters resumes the flow, deleting it cancels them all; and a
chord's callback is released once however its last members' acks and the resolvers
that fold them meet."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

import shardq
from shardq.loops.resolver import FLOWS_PER_FOLD, resolve
from shardq.ops import deadletters
from tests.helpers import in_threads
from tests.test_flows import ack, add, app, call, claimed, emit, pair, run

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour,
              pytest.mark.usefixtures("no_flows")]

__all__ = ["app"]  # the module's handlers


def flow_of(client: shardq.Client, handle: shardq.FlowHandle) -> shardq.Flow:
    flow = client.flow(handle.id)
    assert flow is not None
    return flow


def test_a_dead_member_holds_the_callback_until_retried(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chord([emit.si(1), emit.si(2)], pair.s()))
    first, second, callback = handle.ids
    members = claimed(client)
    ack(client, [members[first]], [1])
    client.nack(members[second], "ValueError: no", dead=True)
    resolve(client.statements)
    flow = flow_of(client, handle)
    assert (flow.state, flow.counts["dead"], flow.counts["succeeded"]) == ("failed", 1, 1)
    assert flow.finished_at is None
    waiting = client.get(callback)
    assert waiting is not None
    assert (waiting.state, waiting.waits) == ("waiting", 1)

    assert client.retry_dead([second]) == [second]
    resolve(client.statements)
    flow = flow_of(client, handle)
    assert (flow.state, flow.counts["dead"]) == ("running", 0)
    assert run(client, call) == {second: [2]}
    assert run(client, call) == {callback: [[1, 2]]}
    flow = flow_of(client, handle)
    assert (flow.state, flow.counts["succeeded"], flow.counts["dead"]) == ("succeeded", 3, 0)
    assert flow.finished_at is not None
    assert client.result(callback).value == [1, 2]


def test_deleting_a_dead_node_cancels_every_node_after_it(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chain(emit.si(1), add.s(1), add.s(1), add.s(1)))
    [task] = claimed(client).values()
    client.nack(task, "ValueError: no", dead=True)
    resolve(client.statements)
    assert [client.get(i).state for i in handle.ids[1:]] == ["waiting"] * 3  # type: ignore[union-attr]
    assert flow_of(client, handle).state == "failed"

    assert client.perform(deadletters.delete(client.statements, [task.id])) == [task.id]
    resolve(client.statements)
    flow = flow_of(client, handle)
    assert (flow.state, flow.counts["cancelled"], flow.counts["waiting"]) == ("failed", 3, 0)
    assert flow.finished_at is not None
    assert [client.get(i) for i in handle.ids] == [None] * 4


def acks_at_once(client: shardq.Client, tasks: list[shardq.Task], values: list[Any]) -> None:
    """Ack each task in a thread of its own, all released at one moment."""
    start = threading.Barrier(len(tasks))

    def one(task: shardq.Task, value: Any) -> None:
        start.wait()
        ack(client, [task], [value])

    assert in_threads(*(lambda t=t, v=v: one(t, v) for t, v in zip(tasks, values,
                                                                   strict=True))) == []


def folds_at_once(client: shardq.Client, n: int) -> None:
    """Run ``n`` resolvers at one moment, each folding until it finds nothing."""
    start = threading.Barrier(n)

    def fold() -> None:
        start.wait()
        resolve(client.statements)

    assert in_threads(*[fold] * n) == []


def test_the_last_members_of_a_chord_release_the_callback_once(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    for _ in range(20):
        handle = client.enqueue_flow(shardq.chord([add.si(i) for i in range(4)], pair.s()))
        callback = handle.ids[-1]
        members = claimed(client)
        ack(client, [members[i] for i in handle.ids[:2]], [0, 1])
        resolve(client.statements)
        acks_at_once(client, [members[i] for i in handle.ids[2:4]], [2, 3])
        folds_at_once(client, 3)
        released = connect.execute("SELECT status, payload -> 'args' FROM shardq.tasks "
                                   "WHERE id = %s", (callback,)).fetchall()
        assert released == [("available", [[0, 1, 2, 3]])]
        assert connect.execute("SELECT count(*) FROM shardq.flow_events").fetchone() == (0,)
        assert run(client, call) == {callback: [[0, 1, 2, 3]]}
        assert flow_of(client, handle).state == "succeeded"


def test_one_resolve_folds_more_flows_than_one_fold_takes(client: shardq.Client) -> None:
    handles = [client.enqueue_flow(shardq.chain(emit.si(i), emit.s()))
               for i in range(FLOWS_PER_FOLD + 6)]
    run(client, call)
    assert sorted(run(client, call).values()) == [
        [i] for i in range(FLOWS_PER_FOLD + 6)]
    assert {flow_of(client, h).state for h in handles} == {"succeeded"}
