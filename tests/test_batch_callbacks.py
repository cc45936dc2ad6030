"""Batches with a completion callback: ``enqueue_many(..., on_complete=)`` runs its callback
once, after every task of the batch ended whatever its outcome, with the batch's counts;
an open batch (written piece by piece) runs it once it is sealed and every piece's
tasks ended."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import shardq
from shardq import InvalidTask
from shardq.core.task import TaskId
from shardq.loops.resolver import FoldReport, resolve
from shardq.ops import batches, deadletters
from shardq.ops.batches import OPEN_WAITS, BatchIds, OpenBatch
from tests.conftest import Databases
from tests.flows_kit import (
    add_to_batch,
    ended,
    payload_of,
    run_by_hand,
    run_worker_until,
    status_of,
    written_rows,
)
from tests.helpers import claim_all, in_threads

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

ITEMS = "batch-items"
CALLBACKS = "batch-callbacks"
app = shardq.App()
TALLY: dict[str, str] = {}
"""Where the callbacks record their runs: ``dsn``, a database with the table."""


@app.handler(ITEMS)
def item(payload: dict[str, Any]) -> int:
    """A batch's task: raises for a payload that says so."""
    if payload.get("fail"):
        raise RuntimeError(f"item {payload['n']} failed")
    return int(payload["n"])


def _record(tag: str | None, counts: dict[str, Any] | None) -> None:
    with psycopg.connect(TALLY["dsn"], autocommit=True) as conn:
        conn.execute("INSERT INTO batch_tally (tag, counts) VALUES (%s, %s)",
                     (tag, psycopg.types.json.Jsonb(counts)))


@app.task(queue=CALLBACKS)
def summary(counts: dict[str, Any], tag: str | None = None) -> dict[str, Any]:
    """A batch's callback: the counts it was given, recorded as one run."""
    _record(tag, counts)
    return {"counts": counts, "tag": tag}


@app.task(queue=CALLBACKS)
def finished(tag: str) -> str:
    """A batch's callback that takes no counts, recorded as one run."""
    _record(tag, None)
    return tag


@pytest.fixture(autouse=True)
def tally(dsn: str, databases: Databases) -> Iterator[psycopg.Connection[Any]]:
    """The callbacks' table, empty, and a connection to read it."""
    TALLY["dsn"] = databases.direct(dsn)
    with psycopg.connect(TALLY["dsn"], autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS batch_tally (tag text, counts jsonb)")
        conn.execute("TRUNCATE batch_tally")
        yield conn


def runs(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """Each run of a callback: its tag and the counts it took."""
    return conn.execute("SELECT tag, counts FROM batch_tally ORDER BY tag").fetchall()


def counts(flow_id: Any, succeeded: int = 0, dead: int = 0,
           cancelled: int = 0) -> dict[str, Any]:
    """The counts a batch's callback takes."""
    return {"flow": str(flow_id), "succeeded": succeeded, "dead": dead, "cancelled": cancelled}


def batch(client: shardq.Client, payloads: list[Any], on_complete: shardq.Signature,
          **options: Any) -> BatchIds:
    """``enqueue_many`` of ``payloads`` on the items' queue, with ``on_complete``."""
    ids = client.enqueue_many(ITEMS, payloads, on_complete=on_complete, **options)
    assert isinstance(ids, BatchIds)
    return ids


def in_order(ids: BatchIds, tasks: list[shardq.Task]) -> list[shardq.Task]:
    """``tasks`` in the order of the batch's ``ids``."""
    by_id = {t.id: t for t in tasks}
    return [by_id[i] for i in ids if i in by_id]


def settle_items(client: shardq.Client, tasks: list[shardq.Task]) -> None:
    """Ack the tasks whose payload does not fail, kill the others."""
    for task in tasks:
        if task.payload.get("fail"):
            client.nack(task, "failed", dead=True)
        else:
            client.ack(task)


# -- enqueue_many(..., on_complete=) ------------------------------------------------------


@pytest.mark.parametrize("size", [5, 40])  # 40: written with COPY
def test_a_batchs_callback_takes_its_counts_once(
        size: int, dsn: str, client: shardq.Client, tally: psycopg.Connection[Any]) -> None:
    ids = batch(client, [{"n": i} for i in range(size)], summary.s("all"))
    assert isinstance(ids, BatchIds)
    assert len(ids) == len(set(ids)) == size
    assert ids.callback_id not in ids
    flow = client.flow(ids.flow_id)
    assert flow is not None
    assert (flow.kind, flow.tasks, flow.result_id, flow.state) == (
        "batch", size + 1, ids.callback_id, "running")
    assert client.get(ids.callback_id).waits == size  # type: ignore[union-attr]
    run_worker_until(dsn, app, ended(client, ids.flow_id))
    assert client.result(ids.callback_id).value == {"counts": counts(ids.flow_id, size),
                                                    "tag": "all"}
    assert runs(tally) == [("all", counts(ids.flow_id, size))]
    flow = client.flow(ids.flow_id)
    assert flow is not None
    assert (flow.state, flow.counts["succeeded"]) == ("succeeded", size + 1)


def test_a_batchs_callback_runs_once_with_its_dead_counted(
        dsn: str, client: shardq.Client, tally: psycopg.Connection[Any]) -> None:
    ids = batch(client, [{"n": i, "fail": i % 3 == 0} for i in range(6)],
                summary.s("some died"), max_attempts=1)

    def called() -> bool:
        return client.result(ids.callback_id).status == "succeeded"

    run_worker_until(dsn, app, called, what="the callback to run")
    assert client.result(ids.callback_id).value["counts"] == counts(ids.flow_id, 4, 2)
    for _ in range(3):
        resolve(client.statements)
    assert runs(tally) == [("some died", counts(ids.flow_id, 4, 2))]
    flow = client.flow(ids.flow_id)
    assert flow is not None
    # Its dead tasks are left in the dead letters: the flow failed, and has not ended.
    assert (flow.state, flow.counts["dead"], flow.counts["succeeded"]) == ("failed", 2, 5)
    assert flow.finished_at is None


def test_a_batch_of_no_task_runs_its_callback_at_once(client: shardq.Client,
                                                       connect: psycopg.Connection[Any]) -> None:
    ids = batch(client, [], summary.s("empty"))
    assert list(ids) == []
    assert status_of(connect, ids.callback_id) == "available"
    assert run_by_hand(client, app, CALLBACKS) == 1
    assert client.result(ids.callback_id).value == {"counts": counts(ids.flow_id),
                                                    "tag": "empty"}
    assert client.flow(ids.flow_id).finished_at is not None  # type: ignore[union-attr]
    empty_si = batch(client, [], finished.si("nothing"))
    assert run_by_hand(client, app, CALLBACKS) == 1
    assert client.result(empty_si.callback_id).value == "nothing"


def test_an_immutable_callback_takes_no_counts(client: shardq.Client,
                                               connect: psycopg.Connection[Any]) -> None:
    ids = batch(client, [{"n": 1}, {"n": 2}], finished.si("done"))
    client.ack_many(claim_all(client, ITEMS))
    resolve(client.statements)
    assert status_of(connect, ids.callback_id) == "available"
    assert payload_of(connect, ids.callback_id)["args"] == ["done"]
    run_by_hand(client, app, CALLBACKS)
    assert client.result(ids.callback_id).value == "done"


def test_a_cancelled_task_counts_down_the_callback(client: shardq.Client,
                                                   tally: psycopg.Connection[Any]) -> None:
    ids = batch(client, [{"n": i} for i in range(3)], summary.s("c"))
    assert client.cancel(ids[1]).status == "available"
    client.ack_many(claim_all(client, ITEMS))
    resolve(client.statements)
    run_by_hand(client, app, CALLBACKS)
    assert runs(tally) == [("c", counts(ids.flow_id, 2, 0, 1))]


def test_a_dead_task_dropped_from_the_dead_letters_leaves_the_callback_waiting(
        client: shardq.Client, connect: psycopg.Connection[Any],
        tally: psycopg.Connection[Any]) -> None:
    ids = batch(client, [{"n": 0}, {"n": 1}], summary.s("dropped"))
    first, second = in_order(ids, claim_all(client, ITEMS))
    client.nack(first, "failed", dead=True)
    resolve(client.statements)
    # The dead task was counted as it died; dropping it changes nothing for the callback.
    assert client.perform(deadletters.delete(client.statements, [first.id])) == [first.id]
    resolve(client.statements)
    assert status_of(connect, ids.callback_id) == "waiting"
    client.ack(second)
    resolve(client.statements)
    run_by_hand(client, app, CALLBACKS)
    assert runs(tally) == [("dropped", counts(ids.flow_id, 1, 1))]
    flow = client.flow(ids.flow_id)
    assert flow is not None
    assert flow.finished_at is not None


def test_a_dead_task_retried_before_the_callback_counts_up_again(
        client: shardq.Client, tally: psycopg.Connection[Any]) -> None:
    ids = batch(client, [{"n": 0}, {"n": 1}], summary.s("retried"))
    first, second = in_order(ids, claim_all(client, ITEMS))
    client.nack(first, "failed", dead=True)
    resolve(client.statements)
    assert client.retry_dead([first.id]) == [first.id]
    client.ack(second)
    resolve(client.statements)
    assert claim_all(client, CALLBACKS) == []  # the retried task has not ended
    client.ack_many(claim_all(client, ITEMS))
    resolve(client.statements)
    run_by_hand(client, app, CALLBACKS)
    assert runs(tally) == [("retried", counts(ids.flow_id, 2))]


def test_concurrent_acks_and_folds_run_a_batchs_callback_once(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    batches_ = [batch(client, [{"n": i} for i in range(10)], summary.s(str(b)))
                for b in range(3)]
    members = {t.id: t for t in claim_all(client, ITEMS)}
    last = [[members[b[-2]] for b in batches_], [members[b[-1]] for b in batches_]]
    client.ack_many([t for t in members.values() if t not in last[0] + last[1]])
    resolve(client.statements)
    gate = threading.Barrier(2)

    def ack(tasks: list[shardq.Task]) -> None:
        gate.wait()
        client.ack_many(tasks)

    assert in_threads(lambda: ack(last[0]), lambda: ack(last[1])) == []
    reports: list[FoldReport] = []
    assert in_threads(*[lambda: reports.append(resolve(client.statements))] * 4) == []
    assert sum(r.released for r in reports) == 3
    for no, b in enumerate(batches_):
        assert payload_of(connect, b.callback_id)["args"] == [counts(b.flow_id, 10), str(no)]
    assert run_by_hand(client, app, CALLBACKS) == 3


@pytest.mark.parametrize("bad", ["keys", "not a signature", "arguments"])
def test_a_bad_batch_is_refused_and_nothing_is_written(
        bad: str, client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    cases: dict[str, dict[str, Any]] = {
        "keys": {"keys": ["a", None], "on_complete": summary.s()},
        "not a signature": {"on_complete": summary},
        "arguments": {"on_complete": summary.s("a", "b")},
    }
    options = cases[bad]
    before = written_rows(connect)
    with pytest.raises(InvalidTask) as refused:
        client.enqueue_many(ITEMS, [{"n": 0}, {"n": 1}], **options)
    assert "\n" not in str(refused.value)
    assert written_rows(connect) == before


@pytest.mark.blocking_client
def test_a_batch_joins_the_callers_transaction(dsn: str, client: shardq.Client,
                                               connect: psycopg.Connection[Any]) -> None:
    before = written_rows(connect)
    with psycopg.connect(dsn) as conn:
        ids = batch(client, [{"n": 0}, {"n": 1}], summary.s(), conn=conn)
        assert client.flow(ids.flow_id) is None  # not committed
        conn.rollback()
    assert written_rows(connect) == before
    assert client.flow(ids.flow_id) is None


# -- open batches -------------------------------------------------------------------------


def flow_columns(conn: psycopg.Connection[Any], ids: list[Any]) -> set[tuple[Any, ...]]:
    """The flow and the tasks after them each of tasks ``ids`` names."""
    rows = conn.execute("SELECT flow_id, flow_next FROM shardq.tasks WHERE id = ANY(%s)",
                        (ids,)).fetchall()
    assert len(rows) == len(ids)
    return {(flow_id, tuple(after)) for flow_id, after in rows}


def test_an_open_batch_runs_its_callback_once_sealed_and_done(
        client: shardq.Client, connect: psycopg.Connection[Any],
        tally: psycopg.Connection[Any]) -> None:
    st = client.statements
    batch = client.perform(batches.open_batch(st, summary.s("open"), name="piecewise"))
    assert isinstance(batch, OpenBatch)
    assert status_of(connect, batch.callback_id) == "waiting"
    early = client.perform(add_to_batch(st, batch, ITEMS, [{"n": i} for i in range(3)]))
    assert flow_columns(connect, early) == {(batch.flow_id, (batch.callback_id,))}
    client.ack_many(claim_all(client, ITEMS))
    resolve(client.statements)
    # Every task written so far ended, but the batch is not sealed.
    assert status_of(connect, batch.callback_id) == "waiting"
    assert client.get(batch.callback_id).waits == OPEN_WAITS - 3  # type: ignore[union-attr]

    assert client.perform(batches.seal(st, batch, 5)) is True
    assert client.perform(batches.seal(st, batch, 5)) is False
    resolve(client.statements)
    assert client.get(batch.callback_id).waits == 2  # type: ignore[union-attr]
    late = client.perform(add_to_batch(st, batch, ITEMS, [{"n": 3}, {"n": 4}]))
    assert flow_columns(connect, late) == {(batch.flow_id, (batch.callback_id,))}
    client.ack(claim_all(client, ITEMS, most=1)[0])
    resolve(client.statements)
    assert status_of(connect, batch.callback_id) == "waiting"
    client.ack_many(claim_all(client, ITEMS))
    assert in_threads(*[lambda: resolve(client.statements)] * 3) == []
    assert run_by_hand(client, app, CALLBACKS) == 1
    assert runs(tally) == [("open", counts(batch.flow_id, 5))]
    flow = client.flow(batch.flow_id)
    assert flow is not None
    assert (flow.kind, flow.name, flow.tasks, flow.state) == ("batch", "piecewise", 6,
                                                               "succeeded")
    assert flow.finished_at is not None


def test_an_open_batch_sealed_as_its_last_task_ends_runs_its_callback_once(
        client: shardq.Client, tally: psycopg.Connection[Any]) -> None:
    st = client.statements
    batch = client.perform(batches.open_batch(st, summary.s("raced")))
    client.perform(add_to_batch(st, batch, ITEMS, [{"n": 0}, {"n": 1}]))
    first, second = claim_all(client, ITEMS)
    client.ack(first)
    gate = threading.Barrier(2)

    def seal() -> None:
        gate.wait()
        assert client.perform(batches.seal(st, batch, 2))

    def ack() -> None:
        gate.wait()
        client.ack(second)

    assert in_threads(seal, ack) == []
    assert in_threads(*[lambda: resolve(client.statements)] * 3) == []
    assert run_by_hand(client, app, CALLBACKS) == 1
    assert runs(tally) == [("raced", counts(batch.flow_id, 2))]


def test_an_open_batch_sealed_empty_runs_its_callback_at_once(
        client: shardq.Client, tally: psycopg.Connection[Any]) -> None:
    st = client.statements
    batch = client.perform(batches.open_batch(st, summary.s("none")))
    assert client.perform(batches.seal(st, batch, 0))
    resolve(client.statements)
    assert run_by_hand(client, app, CALLBACKS) == 1
    assert runs(tally) == [("none", counts(batch.flow_id))]
    assert ended(client, batch.flow_id)()


def test_seal_refuses_what_is_not_an_open_batch(client: shardq.Client) -> None:
    st = client.statements
    ids = batch(client, [{"n": 0}], summary.s())
    closed = OpenBatch(TaskId(ids.flow_id), ids.callback_id)
    assert client.perform(batches.seal(st, closed, 1)) is False
    handle = client.enqueue_flow(summary.si({}))
    assert client.perform(batches.seal(st, OpenBatch(TaskId(handle.id), handle.ids[0]),
                                       1)) is False
    with pytest.raises(InvalidTask):
        batches.seal(st, closed, -1)
