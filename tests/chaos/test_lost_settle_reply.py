"""Settles whose replies are lost: the attempt they end is recorded once.

A nack, and an ack of a task claimed before, record the attempt they end in the same
statement (``attempts_add``).  The statement reaches the server and commits, its reply
never reaches the client, and the client runs the statement again: the task is no
longer locked under the claim's token, so the retry ends nothing and records nothing,
and the call succeeds (settle's check finds the work done).
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from shardq.ops import workers
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.clients import open_client

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=["Client", "AsyncClient"])
def kind(request: pytest.FixtureRequest) -> str:
    """Each client in turn: both run the same plans, through their own runner."""
    return str(request.param)


def test_a_nack_and_an_ack_retried_after_their_replies_were_lost_record_each_attempt_once(
        chaos_pg: ThrowawayPostgres, proxy: Proxy, kind: str) -> None:
    name = chaos_pg.create_database()
    worker = uuid.uuid4()
    with open_client(kind, proxy.url(name), statement_timeout_s=3) as client:
        client.perform(workers.register(client.statements, worker, "chaos", "h", 1, ["lost"]))
        task_id = client.enqueue("lost", {})
        [task] = client.claim("lost", worker_id=worker)
        proxy.withhold_reply(rb"WITH failed AS", times=1)
        client.nack(task, "boom", retry_in_s=0)
        assert len(proxy.withheld) == 1  # the fault happened: the nack's reply
        [task] = client.claim("lost", worker_id=worker)
        proxy.withhold_reply(rb"'acked'::text AS outcome", times=1)
        client.ack(task)
        assert len(proxy.withheld) == 2  # and the ack's
    with psycopg.connect(chaos_pg.url(name)) as conn:
        rows = conn.execute("SELECT attempt, outcome, error, worker_name FROM shardq.attempts "
                            "WHERE task_id = %s ORDER BY attempt", (task_id,)).fetchall()
        left = conn.execute("SELECT count(*) FROM shardq.tasks").fetchone()
    assert rows == [(1, "failed", "boom", "chaos"), (2, "acked", None, "chaos")]
    assert left == (0,)
