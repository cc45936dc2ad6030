"""A worker under a binding limit hands each freed slot on in its ack's transaction,
and a stopping one claims no successor (see tests/test_handover.py for the call
itself).  Not behaviour tests, so never run behind PgBouncer: a worker that listens
refuses to start behind a transaction-pooling one."""

from __future__ import annotations

import itertools

import psycopg
import pytest

from tests.conftest import Databases
from tests.handover_kit import capped_worker, observed, transaction
from tests.helpers import query, scalar, wait_for

pytestmark = [pytest.mark.server, pytest.mark.timeout(120)]


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
