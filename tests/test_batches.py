"""Batches with a completion callback (``enqueue_many(..., on_complete=sig)``): the callback
runs once, when every member ended, with the batch's counts first (dead members
counted); an empty batch releases it at once; ``.si`` takes no counts; keys are refused."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import shardq
from shardq.loops.resolver import resolve
from tests.helpers import claim_all, rows

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour,
              pytest.mark.usefixtures("no_flows")]


MEMBERS, DONE = "batch", "batch-done"

app = shardq.App()  # its function only names the callback: the test's client writes batches


@app.task(queue=DONE)
def summary(counts: dict[str, Any], tag: str = "") -> str:
    """A batch's callback."""
    return tag


def counts(flow_id: Any, succeeded: int = 0, dead: int = 0) -> dict[str, Any]:
    return {"flow": str(flow_id), "succeeded": succeeded, "dead": dead, "cancelled": 0}


def test_the_callback_runs_once_with_the_counts_first(client: shardq.Client) -> None:
    ids = client.enqueue_many(MEMBERS, [{"n": n} for n in range(4)],
                              on_complete=summary.s(tag="nightly"))
    assert isinstance(ids, list)
    assert len(ids) == 4
    assert ids.callback_id not in ids  # type: ignore[attr-defined]
    flow = client.flow(ids.flow_id)  # type: ignore[attr-defined]
    assert flow is not None
    assert (flow.kind, flow.tasks, flow.result_id) == ("batch", 5, ids.callback_id)  # type: ignore[attr-defined]

    members = claim_all(client, MEMBERS)
    assert {t.id for t in members} == set(ids)
    client.ack_many(members[:3])
    resolve(client.statements)
    assert claim_all(client, DONE) == []  # one member left
    client.nack(members[3], "ValueError: no", dead=True)
    resolve(client.statements)
    [callback] = claim_all(client, DONE)
    assert callback.id == ids.callback_id  # type: ignore[attr-defined]
    assert (callback.payload["args"], callback.payload["kwargs"]) == (
        [counts(ids.flow_id, succeeded=3, dead=1)], {"tag": "nightly"})  # type: ignore[attr-defined]
    client.ack(callback)
    resolve(client.statements)
    assert claim_all(client, DONE) == []
    # The dead member retried and done after the callback ran: no second callback.
    assert client.retry_dead([members[3].id]) == [members[3].id]
    resolve(client.statements)
    client.ack_many(claim_all(client, MEMBERS))
    resolve(client.statements)
    assert claim_all(client, DONE) == []
    flow = client.flow(ids.flow_id)  # type: ignore[attr-defined]
    assert flow is not None
    assert (flow.counts["succeeded"], flow.counts["dead"], flow.state) == (5, 0, "succeeded")
    assert flow.finished_at is not None


def test_an_empty_batch_releases_its_callback_at_once(client: shardq.Client) -> None:
    ids = client.enqueue_many(MEMBERS, [], on_complete=summary.s())
    assert ids == []
    [callback] = claim_all(client, DONE)  # no fold needed: nothing will ever fold it
    assert callback.id == ids.callback_id  # type: ignore[attr-defined]
    assert callback.payload["args"] == [counts(ids.flow_id)]  # type: ignore[attr-defined]


def test_an_immutable_callback_takes_no_counts(client: shardq.Client) -> None:
    ids = client.enqueue_many(MEMBERS, [{"n": 1}, {"n": 2}],
                              on_complete=summary.si({"mine": True}, tag="x"))
    client.ack_many(claim_all(client, MEMBERS))
    resolve(client.statements)
    [callback] = claim_all(client, DONE)
    assert callback.id == ids.callback_id  # type: ignore[attr-defined]
    assert (callback.payload["args"], callback.payload["kwargs"]) == (
        [{"mine": True}], {"tag": "x"})


def test_a_batch_with_a_callback_takes_no_keys(client: shardq.Client,
                                               connect: psycopg.Connection[Any]) -> None:
    with pytest.raises(shardq.InvalidTask, match="no keys") as raised:
        client.enqueue_many(MEMBERS, [{"n": 1}, {"n": 2}], keys=[None, "k"],
                            on_complete=summary.s())
    assert "\n" not in str(raised.value)
    with pytest.raises(shardq.InvalidTask, match="on_complete"):
        client.enqueue_many(MEMBERS, [{"n": 1}], on_complete="summary")  # type: ignore[arg-type]
    with pytest.raises(shardq.InvalidTask, match="on_complete"):  # summary needs counts
        client.enqueue_many(MEMBERS, [{"n": 1}], on_complete=summary.si())
    assert (rows(connect, "flows"), rows(connect, "tasks")) == (0, 0)
