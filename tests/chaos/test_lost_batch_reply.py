"""Batches whose replies are lost: a COMMIT's on the write path of engines without COPY,
and a COPY's on PostgreSQL's.

CockroachDB writes a batch with one multi-row ``INSERT … ON CONFLICT (id) DO NOTHING``
(``sql/cockroachdb/enqueue_many.sql``).  That statement is PostgreSQL too, so the path
runs here, through the fault proxy, with the schema's layout set to CockroachDB's
dialect: the COMMIT reaches the server and commits, its reply never reaches the
client, and the client's retry of the whole transaction must neither write nor count
the batch a second time.
"""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from shardq.core.dialect import COCKROACHDB
from shardq.core.task import TaskId
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.clients import Blocking, open_client

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["Client", "AsyncClient"])
def kind(request: pytest.FixtureRequest) -> str:
    """Each client in turn: both run the same plans, through their own runner."""
    return str(request.param)


def test_a_batch_retried_after_its_commit_reply_was_lost_is_written_and_counted_once(
        chaos_pg: ThrowawayPostgres, proxy: Proxy, kind: str) -> None:
    name = chaos_pg.create_database()
    with open_client(kind, proxy.url(name)) as client:
        runner = client.aclient.db if isinstance(client, Blocking) else client.db
        assert runner is not None
        runner.layout = dataclasses.replace(runner.layout, dialect=COCKROACHDB)
        assert not runner.layout.dialect.copy  # the multi-row INSERT, not COPY
        proxy.withhold_reply(rb"^\s*COMMIT", times=1)
        ids = client.enqueue_many("lost", [{"n": n} for n in range(50)])
    assert len(proxy.withheld) == 1  # the fault happened: the first COMMIT's reply
    assert_written_once(chaos_pg.url(name), ids)


def test_a_batch_whose_copy_reply_was_lost_is_written_and_counted_once(
        chaos_pg: ThrowawayPostgres, proxy: Proxy, kind: str) -> None:
    """On PostgreSQL a batch of 1,000 is two COPY statements, and the client encodes
    the second one's rows after sending the end of the first one's, while the server
    writes them.  The first COPY's reply never arrives and its connection is cut: the
    transaction never committed, and the retry writes and counts the batch once."""
    name = chaos_pg.create_database()
    with open_client(kind, proxy.url(name)) as client:
        assert client.statements.dialect.copy
        proxy.withhold_reply(rb"COPY shardq\.tasks", times=1)
        ids = client.enqueue_many("lost", [{"n": n} for n in range(1_000)])
    assert len(proxy.withheld) == 1  # the fault happened: the first COPY's reply
    assert_written_once(chaos_pg.url(name), ids)


def assert_written_once(url: str, ids: list[TaskId]) -> None:
    """Queue 'lost' holds the batch ``ids`` (payloads ``{"n": 0}``, ``{"n": 1}``, …),
    each task once, and the batch was counted once."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, payload FROM shardq.tasks WHERE queue = 'lost'").fetchall()
        counted = conn.execute("SELECT sum(enqueued) FROM shardq.throughput "
                               "WHERE queue = 'lost'").fetchone()
    assert sorted(rows) == sorted(zip(ids, [{"n": n} for n in range(len(ids))], strict=True))
    assert counted == (len(ids),)
