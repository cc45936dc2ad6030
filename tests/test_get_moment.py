"""A task's record (``get``) shows one moment, though its row, attempts and steps are
read in statements of their own: a claim, a failure, an ack or a park that commits
between two of them is either all in the record or not in it at all.

Each test runs ``get``'s plan request by request on a connection of its own (as a
client runs it) and commits the change, through the client, right after one of them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core import db
from shardq.core.plan import Done, Request, Steps, advance
from shardq.core.task import TaskInfo
from shardq.ops import inspection, settle
from tests import durable_kit
from tests.helpers import claim_all

pytestmark = [pytest.mark.server, pytest.mark.behaviour]

Q = "moment"


def committing_after(steps: Steps[Any], after: int | None, change: Callable[[], object],
                     sent: list[Request]) -> Steps[Any]:
    """``steps``, with ``change`` made once its ``after``-th request has run (after each
    one with None); each request is added to ``sent``."""
    outcome: Request | Done[Any] = advance(steps)
    while not isinstance(outcome, Done):
        result = yield outcome
        sent.append(outcome)
        if after is None or len(sent) == after:
            change()
        outcome = advance(steps, result)
    return outcome.value


def read_across(client: shardq.Client, dsn: str, task_id: uuid.UUID, after: int | None,
                change: Callable[[], object], sent: list[Request] | None = None
                ) -> TaskInfo | None:
    """``get`` of ``task_id``, with ``change`` committed after its ``after``-th statement
    (after each with None)."""
    steps = committing_after(inspection.get(client.statements, task_id).steps(), after,
                             change, [] if sent is None else sent)
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        db.in_utc(conn)
        record: TaskInfo | None = db.drive(steps, conn, own=True)
    return record


def one_moment(info: TaskInfo) -> None:
    """The attempts agree with the row: a locked task's last attempt is the running one,
    numbered as its claims; any other task has none running."""
    running = [a.attempt for a in info.history if a.outcome == "running"]
    if info.state == "locked":
        assert running == [info.times_claimed]
        assert info.history[-1].outcome == "running"
    else:
        assert running == []
    if info.history:
        assert info.history[-1].attempt == info.times_claimed


@pytest.mark.parametrize("after", [1, 2])
def test_a_claim_between_the_reads(client: shardq.Client, dsn: str, after: int) -> None:
    task_id = client.enqueue(Q, {})
    record = read_across(client, dsn, task_id, after, lambda: claim_all(client, Q))
    assert record is not None
    one_moment(record)
    assert (record.state, record.times_claimed) == ("locked", 1)


@pytest.mark.parametrize("after", [1, 2])
def test_a_failure_between_the_reads(client: shardq.Client, dsn: str, after: int) -> None:
    task_id = client.enqueue(Q, {})
    [task] = claim_all(client, Q)
    record = read_across(client, dsn, task_id, after,
                         lambda: client.nack(task, "boom", retry_in_s=60))
    assert record is not None
    one_moment(record)
    assert [(a.attempt, a.outcome) for a in record.history] == [(1, "failed")]


@pytest.mark.parametrize("after", [1, 2])
def test_an_ack_between_the_reads(client: shardq.Client, dsn: str, after: int) -> None:
    task_id = client.enqueue(Q, {}, max_attempts=3)
    [task] = claim_all(client, Q)
    client.nack(task, "boom", retry_in_s=0)
    [task] = claim_all(client, Q)
    ack = settle.ack(client.statements, [task], [None])
    assert read_across(client, dsn, task_id, after, lambda: client.perform(ack)) is None


@pytest.mark.parametrize("after", [1, 2])
def test_a_park_between_the_reads(client: shardq.Client, dsn: str, after: int) -> None:
    task_id = client.enqueue(Q, {})
    [task] = claim_all(client, Q)
    event = f"approve-{uuid.uuid4().hex}"
    record = read_across(client, dsn, task_id, after,
                         lambda: durable_kit.run(client, task, event))
    assert record is not None
    one_moment(record)
    assert record.state == "parked"
    assert [(a.attempt, a.outcome) for a in record.history] == [(1, "parked")]
    assert [(s.name, s.state) for s in record.steps] == [("charge", "done"),
                                                         ("approval", "waiting")]


def test_a_row_that_changes_under_every_read_is_read_a_bounded_number_of_times(
        client: shardq.Client, dsn: str) -> None:
    task_id = client.enqueue(Q, {})
    [task] = claim_all(client, Q, lease_s=60)
    sent: list[Request] = []
    record = read_across(client, dsn, task_id, None, lambda: client.extend(task, 60), sent)
    # The first read, then the attempts and the row again, READS times.
    assert len(sent) == 1 + 2 * inspection.READS
    assert record is not None
    assert (record.state, record.lease_token) == ("locked", task.lease_token)
