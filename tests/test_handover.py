"""An ack and its successors' claim in one transaction (``ack_and_claim``): the slots the
acked tasks held under ``max_running`` go to the tasks claimed before anyone else can
see them free; a lost lease, or a claim that loses a slot to a concurrent one, never
undoes the ack; and a worker under a binding limit hands every slot on so.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

import shardq
from tests.apps import limited
from tests.clients import Blocking, open_client
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.helpers import query, scalar, wait_for, wait_for_lock_wait

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

ROOT = Path(__file__).resolve().parent.parent
Q = "handed"
BUCKET = 0


# An observer that owes nothing to shardq: a trigger logs, for each task, the
# transaction that claimed it and the one that deleted (acked) it.
OBSERVER = """
CREATE TABLE handover_log (task_id uuid NOT NULL, what text NOT NULL, xid xid8 NOT NULL);
CREATE FUNCTION handover_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO handover_log VALUES (OLD.id, 'acked', pg_current_xact_id());
    ELSIF NEW.status = 'locked' AND OLD.status <> 'locked' THEN
        INSERT INTO handover_log VALUES (NEW.id, 'claimed', pg_current_xact_id());
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER handover_log AFTER UPDATE OR DELETE ON shardq.tasks
    FOR EACH ROW EXECUTE FUNCTION handover_log();
"""


def observed(databases: Databases) -> str:
    """A fresh database of one bucket (one turn sees every waiting task), with the
    observer."""
    url = databases.create(bucket_count=1)
    with psycopg.connect(databases.direct(url), autocommit=True) as conn:
        conn.execute(OBSERVER)
    return url


def transaction(conn: psycopg.Connection[Any], task_id: Any, what: str) -> Any:
    """The transaction that ``what`` (claimed, acked) the task ``task_id`` last."""
    rows = conn.execute("SELECT xid::text FROM handover_log WHERE task_id = %s AND what = %s",
                        (task_id, what)).fetchall()
    return rows[-1][0] if rows else None


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


def test_the_freed_slot_goes_to_the_successor_in_the_acks_own_transaction(
        client: Blocking, connect: psycopg.Connection[Any]) -> None:
    client.set_limits(Q, max_running=2, create=True)
    client.enqueue_many(Q, [{"n": n} for n in range(5)])
    bucket = BUCKET
    control = client.limits(Q)
    first, second = client.claim_turn(Q, bucket, after=None, control=control, limit=2).tasks
    handed = client.ack_and_claim([first], Q, bucket, control=control, limit=2)
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
    client.set_limits(Q, max_running=2, create=True)
    client.enqueue_many(Q, [{"n": n} for n in range(5)])
    bucket = BUCKET
    control = client.limits(Q)
    stale, kept = client.claim_turn(Q, bucket, after=None, control=control, limit=2).tasks
    # Another claim took the stale task over (its lease token moved on).
    connect.execute("UPDATE shardq.tasks SET lease_token = gen_random_uuid() WHERE id = %s",
                    (stale.id,))
    handed = client.ack_and_claim([stale, kept], Q, bucket, control=control, limit=2)
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
    client.set_limits(Q, max_running=2, create=True)
    ids = client.enqueue_many(Q, [{"n": n} for n in range(6)])
    bucket = BUCKET
    control = client.limits(Q)
    [done] = client.claim_turn(Q, bucket, after=None, control=control, limit=1).tasks
    rival_task = next(i for i in ids if i != done.id)
    results: list[Any] = []
    # A rival claim takes slot 2 for another task and has not committed yet: the
    # successors' claim sees slots 1 (the ack's) and 2 free, takes both, and waits on
    # the unique index for the rival, which then wins.
    with psycopg.connect(databases.direct(one_bucket)) as rival:
        rival.execute("UPDATE shardq.tasks SET status = 'locked', slot = 2 WHERE id = %s",
                      (rival_task,))
        hand = threading.Thread(target=lambda: results.append(client.ack_and_claim(
            [done], Q, bucket, control=control, limit=2)))
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

@contextmanager
def capped_worker(databases: Databases, url: str, tasks: int, seconds: float
                  ) -> Iterator[tuple[str, Daemon]]:
    """tests.apps.limited's ``capped`` queue on ``url`` under ``max_running=1``, with
    ``tasks`` runs of ``seconds`` enqueued, and one ``shardq consume`` of 8 handler slots
    on it (stopped at the end if still running); yields the database's direct URL and
    the daemon."""
    direct = databases.direct(url)
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute(limited.SETUP)
    with shardq.Client(url) as c:
        c.set_limits("capped", max_running=1, create=True)
        limited.app.use_client(c)
        limited.capped.enqueue_many([(n, seconds) for n in range(tasks)])
    env = {**os.environ, "SHARDQ_DSN": url, "LIMITED_LOG_DSN": direct,
           "PYTHONPATH": str(ROOT)}
    daemon = Daemon(env, "tests.apps.limited:app", "--queue", "capped", "--concurrency", "8",
                    "--no-sample-stats")
    try:
        yield direct, daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


@pytest.mark.blocking_client
@pytest.mark.timeout(120)
def test_a_worker_under_a_binding_limit_hands_every_slot_on(databases: Databases) -> None:
    """One ``shardq consume`` of 8 handler slots under ``max_running=1``, on one bucket:
    after the first, every task was claimed by the transaction that acked the one
    before it."""
    with capped_worker(databases, observed(databases), 8, 0.02) as (direct, _):
        wait_for(lambda: scalar(direct, "SELECT count(*) = 0 FROM shardq.tasks"), timeout=60,
                 what="the queue to drain")
    runs = [row[0] for row in query(direct, "SELECT task_id FROM limited_runs "
                                            "ORDER BY started_at")]
    assert len(runs) == 8
    with psycopg.connect(direct, autocommit=True) as conn:
        handed_on = [transaction(conn, before, "acked") == transaction(conn, after, "claimed")
                     for before, after in itertools.pairwise(runs)]
    assert handed_on == [True] * 7


@pytest.mark.blocking_client
@pytest.mark.timeout(120)
def test_a_worker_stopped_under_a_binding_limit_leaves_no_task_locked(
        databases: Databases) -> None:
    """SIGTERM while a task runs under ``max_running=1``: its handler ends within the
    grace and its outcome is written, but no successor is claimed into a worker that
    stops (it would stay locked, unrun, until its lease ran out)."""
    url = databases.create(bucket_count=1)
    with capped_worker(databases, url, 4, 1.0) as (direct, daemon):
        wait_for(lambda: scalar(direct, "SELECT count(*) FROM limited_runs") == 1,
                 timeout=60, what="the first task to start")
        code = daemon.stop()
    assert code == 0, daemon.output
    assert scalar(direct, "SELECT count(*) FROM limited_runs WHERE ended_at IS NULL") == 0
    assert query(direct, "SELECT status, count(*) FROM shardq.tasks GROUP BY status") == [
        ("available", 3)]
