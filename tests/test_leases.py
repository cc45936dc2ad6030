"""Each held task keeps the lease it was claimed with, whatever the other queues' leases."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from shardq.worker.leases import LeaseKeeper
from shardq.worker.metrics import Metrics
from tests.apps import leases
from tests.helpers import wait_for

pytestmark = pytest.mark.server


@pytest.fixture
def leased(db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[shardq.Client]:
    """tests.apps.leases' app on the fresh database ``db`` (its handlers record runs there)."""
    monkeypatch.setenv("SHARDQ_DSN", db)
    with shardq.Client(db) as client:
        leases.app.use_client(client)
        yield client


def runs(dsn: str) -> list[tuple[Any, ...]]:
    """Every recorded run: (task id, n, attempt, pid, outcome), in start order."""
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT task_id, n, attempt, pid, outcome FROM runs "
                            "ORDER BY started_at").fetchall()


def test_tasks_of_a_short_lease_queue_beside_a_long_one_run_once(
        db: str, leased: shardq.Client, caplog: pytest.LogCaptureFixture) -> None:
    # Three 8 s tasks under a 3 s lease, in a worker that also consumes a queue with a
    # 60 s lease.  A janitor runs, so a lease that lapsed would be rescued and its task
    # run again: every task must run once, and no lease may be lost.
    ids = leases.short.enqueue_many([(n, 8.0) for n in range(3)])
    ids.append(leases.long.enqueue(3, 0.1))
    worker = Worker(leases.app, ClientConfig(dsn=db),
                    WorkerConfig(janitors=1, listen=False, concurrency=4))
    assert worker.keeper.interval_s == pytest.approx(1.0)  # a third of the shortest lease
    caplog.set_level(logging.WARNING, logger="shardq")
    worker.start()
    try:
        wait_for(lambda: leased.get(ids[0]) is None and leased.get(ids[1]) is None
                 and leased.get(ids[2]) is None and leased.get(ids[3]) is None,
                 timeout=60, what="every task to be acked")
    finally:
        worker.stop(5)
    done = runs(db)
    assert sorted((n, attempt, outcome) for _, n, attempt, _, outcome in done) == [
        (0, 1, "ok"), (1, 1, "ok"), (2, 1, "ok"), (3, 1, "ok")]
    assert sum(s.value for m in worker.metrics.lease_lost.collect() for s in m.samples
               if s.name.endswith("_total")) == 0
    assert not [r for r in caplog.records if "lease lost" in r.getMessage()]


def test_the_heartbeat_extends_each_task_by_its_own_lease(
        db: str, leased: shardq.Client) -> None:
    short_id = leases.short.enqueue(0, 0.0)
    long_id = leases.long.enqueue(1, 0.0)
    now = [100.0]  # the keeper's monotonic clock, driven by the test
    keeper = LeaseKeeper(leased, 3.0, Metrics(), monotonic=lambda: now[0])
    held = {}
    for queue, lease_s in (("short", 3.0), ("long", 60.0)):
        for bucket in range(leased.bucket_count):
            for task in leased.claim_bucket(queue, bucket, lease_s=lease_s):
                held[queue] = keeper.hold([task], lease_s, now[0])[0].task
    assert set(held) == {"short", "long"}

    def left() -> dict[str, float]:
        with psycopg.connect(db) as conn:
            rows: dict[Any, Any] = dict(conn.execute(
                "SELECT id, exec_time - now() FROM shardq.tasks WHERE id = ANY(%s)",
                [[short_id, long_id]]).fetchall())
        return {"short": rows[short_id].total_seconds(), "long": rows[long_id].total_seconds()}

    # The short lease comes due within every tick (a third of 3 s); the long one only
    # once a third of 60 s has passed, and each is extended by its own length.
    assert keeper.run_once() == 1
    before = held["long"].exec_time
    now[0] += 10
    assert keeper.run_once() == 1
    assert held["long"].exec_time == before
    assert left()["short"] == pytest.approx(3, abs=0.5)
    assert left()["long"] < 60
    now[0] += 9.5
    assert keeper.run_once() == 2
    assert held["long"].exec_time > before
    assert left()["long"] == pytest.approx(60, abs=0.5)
    assert left()["short"] == pytest.approx(3, abs=0.5)
    assert keeper.let_go(list(held.values())) == list(held.values())


def test_a_cancelled_task_is_logged_and_its_handler_told(
        db: str, leased: shardq.Client, caplog: pytest.LogCaptureFixture) -> None:
    task_id = leases.short.enqueue(0, 30.0)
    keeper = LeaseKeeper(leased, 3.0, Metrics())
    tasks = [t for b in range(leased.bucket_count)
             for t in leased.claim_bucket("short", b, lease_s=3.0)]
    [context] = keeper.hold(tasks, 3.0, keeper.monotonic())
    assert leased.cancel(task_id).status == "locked"
    caplog.set_level(logging.WARNING, logger="shardq")
    assert keeper.run_once() == 0
    assert context.cancelled
    [line] = [r.getMessage() for r in caplog.records if "lease lost" in r.getMessage()]
    assert str(task_id) in line
    assert "cancelled" in line
    assert keeper.let_go(tasks) == []  # its outcome is dropped
