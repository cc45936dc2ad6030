"""An ack and its successors' claim in one transaction (``ack_and_claim``): the slots the
acked tasks held under ``max_running`` go to the tasks claimed before anyone else can
see them free; and a lost lease, or a claim that loses a slot to a concurrent one,
never undoes the ack.  A worker's use of it: tests/test_handover_worker.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from shardq import Control, InvalidTask, Task
from shardq.core.task import TaskId
from tests.clients import Blocking, open_client
from tests.conftest import Databases
from tests.handover_kit import observed, transaction
from tests.helpers import wait_for_lock_wait

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

Q = "handed"
BUCKET = 0


@pytest.fixture(scope="module")
def one_bucket(databases: Databases) -> str:
    """The module's database (see :func:`observed`)."""
    return observed(databases)


@pytest.fixture
def client(one_bucket: str, client_kind: str, databases: Databases) -> Iterator[Blocking]:
    """A client on ``one_bucket``, emptied of tasks, attempts and limits."""
    with psycopg.connect(databases.direct(one_bucket), autocommit=True) as conn:
        conn.execute("TRUNCATE shardq.tasks, shardq.attempts, handover_log")
        conn.execute("DELETE FROM shardq.queues")
    with open_client(client_kind, one_bucket) as c:
        yield c  # type: ignore[misc]


@pytest.fixture
def connect(one_bucket: str, databases: Databases) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection straight to ``one_bucket``."""
    with psycopg.connect(databases.direct(one_bucket), autocommit=True) as conn:
        yield conn


def slots(conn: psycopg.Connection[Any]) -> dict[Any, int]:
    """The slot each running task of ``Q`` holds, by id."""
    rows = conn.execute("SELECT id, slot FROM shardq.tasks WHERE queue = %s "
                        "AND status = 'locked'", (Q,)).fetchall()
    return {task_id: slot for task_id, slot in rows}


def running(client: Blocking, enqueued: int, claimed: int
            ) -> tuple[Control, list[TaskId], list[Task]]:
    """``Q`` under ``max_running=2`` with ``enqueued`` tasks, ``claimed`` of them claimed:
    its control as a worker reads it, the ids enqueued and the tasks claimed."""
    client.set_limits(Q, max_running=2, create=True)
    ids = client.enqueue_many(Q, [{"n": n} for n in range(enqueued)])
    control = client.limits(Q)
    turn = client.claim_turn(Q, BUCKET, after=None, control=control, limit=claimed)
    return control, ids, turn.tasks


def test_the_freed_slot_goes_to_the_successor_in_the_acks_own_transaction(
        client: Blocking, connect: psycopg.Connection[Any]) -> None:
    control, _, (first, second) = running(client, 5, 2)
    handed = client.ack_and_claim([first], Q, BUCKET, control=control, limit=2)
    assert handed.lost == []
    # One slot was freed, so one successor, in that very slot; the limit held.
    [successor] = handed.turn.tasks
    assert slots(connect) == {second.id: slots(connect)[second.id], successor.id: 1}
    assert first.id not in slots(connect)
    assert client.get(first.id) is None
    assert client.limits(Q).running == 2
    # One transaction acked the first task and claimed its successor.
    assert transaction(connect, first.id, "acked") is not None
    assert transaction(connect, first.id, "acked") == transaction(connect, successor.id,
                                                                  "claimed")


def test_a_lost_lease_is_reported_and_the_rest_is_acked_and_handed_on(
        client: Blocking, connect: psycopg.Connection[Any]) -> None:
    control, _, (stale, kept) = running(client, 5, 2)
    # Another claim took the stale task over (its lease token moved on).
    connect.execute("UPDATE shardq.tasks SET lease_token = gen_random_uuid() WHERE id = %s",
                    (stale.id,))
    handed = client.ack_and_claim([stale, kept], Q, BUCKET, control=control, limit=2)
    assert handed.lost == [stale.id]
    assert client.get(kept.id) is None  # acked: the failed one did not undo it
    assert client.get(stale.id) is not None
    # The acked task's slot went on; the stale one still holds its own.
    [successor] = handed.turn.tasks
    assert set(slots(connect)) == {stale.id, successor.id}
    assert client.limits(Q).running == 2


def test_a_claim_that_loses_a_slot_to_a_concurrent_one_keeps_the_ack(
        client: Blocking, one_bucket: str, databases: Databases,
        connect: psycopg.Connection[Any]) -> None:
    control, ids, [done] = running(client, 6, 1)
    rival_task = next(i for i in ids if i != done.id)
    results: list[Any] = []
    # A rival claim takes slot 2 for another task and has not committed yet: the
    # successors' claim sees slots 1 (the ack's) and 2 free, takes both, and waits on
    # the unique index for the rival, which then wins.
    with psycopg.connect(databases.direct(one_bucket)) as rival:
        rival.execute("UPDATE shardq.tasks SET status = 'locked', slot = 2 WHERE id = %s",
                      (rival_task,))
        hand = threading.Thread(target=lambda: results.append(client.ack_and_claim(
            [done], Q, BUCKET, control=control, limit=2)))
        hand.start()
        wait_for_lock_wait(connect)
        rival.commit()
        hand.join()
    (handed,) = results
    assert handed.turn.tasks == []
    assert handed.turn.raced
    # The claim's savepoint fell back; the ack's transaction committed.
    assert client.get(done.id) is None
    assert slots(connect) == {rival_task: 2}


def test_a_successors_bucket_chosen_for_more_buckets_keeps_the_ack(client: Blocking) -> None:
    """A worker chose the bucket before a reshard lowered the count: the bucket is taken
    modulo the count, and the ack is written whatever it was."""
    control, _, (first, _second) = running(client, 5, 2)
    beyond = client.bucket_count + BUCKET  # the same bucket, one count round
    handed = client.ack_and_claim([first], Q, beyond, control=control, limit=2)
    assert client.get(first.id) is None
    assert len(handed.turn.tasks) == 1
    with pytest.raises(InvalidTask, match="bucket must be a non-negative integer"):
        client.ack_and_claim([], Q, -1, control=control, limit=2)
