"""The janitor, driven by an injected clock: rescue, backoff, dead-lettering, concurrency."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, JanitorReport, ManualClock


@pytest.fixture
def timed(clocked: Callable[..., Client]) -> Client:
    return clocked(backoff_base_s=2, backoff_cap_s=100, backoff_jitter=0.25)


def claim_everything(client: Client, queue: str = "q", lease_s: float = 10) -> list[shardq.Task]:
    return [t for b in range(client.bucket_count)
            for t in client.claim_bucket(queue, b, limit=1000, lease_s=lease_s)]


def delays(conn: psycopg.Connection[Any], since: datetime) -> list[float]:
    rows = conn.execute("SELECT exec_time FROM shardq.tasks WHERE status = 'available'")
    return [(r[0] - since).total_seconds() for r in rows]


def test_nothing_to_do(timed: Client) -> None:
    assert timed.run_janitor_once() == JanitorReport()


def test_live_leases_are_left_alone(timed: Client, clock: ManualClock) -> None:
    timed.enqueue_many("q", [{}] * 50)
    assert len(claim_everything(timed, lease_s=10)) == 50
    clock.advance(9.999)
    assert timed.run_janitor_once() == JanitorReport()
    assert timed.stats("q")["locked"] == 50


def test_expired_leases_come_back_with_backoff(timed: Client, clock: ManualClock,
                                               connect: psycopg.Connection[Any]) -> None:
    timed.enqueue_many("q", [{}] * 200)
    claim_everything(timed, lease_s=10)
    clock.advance(10)
    report = timed.run_janitor_once()
    assert report == JanitorReport(rescued=200)
    # attempts = 1: base 2 s x 2^1 = 4 s, cut by at most 25 % jitter
    got = delays(connect, clock.now())
    assert len(got) == 200 and all(3.0 - 1e-6 <= d <= 4.0 + 1e-6 for d in got)
    assert len({round(d, 6) for d in got}) > 1  # jittered
    rows = connect.execute(
        "SELECT DISTINCT last_error, times_requeued, lease_token IS NULL FROM shardq.tasks"
    ).fetchall()
    assert rows == [("lease expired: the worker stopped or overran its lease", 1, True)]
    assert claim_everything(timed) == []  # backing off
    clock.advance(4)
    tasks = claim_everything(timed)
    assert len(tasks) == 200 and {t.attempts for t in tasks} == {2}


def test_backoff_grows_and_is_capped(timed: Client, clock: ManualClock,
                                     connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("q", {}, max_attempts=20)
    for attempts in range(1, 9):
        [task] = claim_everything(timed, lease_s=1)
        assert task.attempts == attempts
        clock.advance(1)
        assert timed.run_janitor_once().rescued == 1
        [delay] = delays(connect, clock.now())
        expected = min(100, 2 * 2**attempts)
        assert expected * 0.75 - 1e-6 <= delay <= expected + 1e-6
        clock.advance(delay)


def test_last_attempt_goes_dead(timed: Client, clock: ManualClock,
                                connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("q", {"poison": True}, max_attempts=1)
    timed.enqueue("q", {"poison": False}, max_attempts=2)
    claim_everything(timed)
    clock.advance(10)
    assert timed.run_janitor_once() == JanitorReport(rescued=1, dead=1)
    dead = connect.execute(
        "SELECT payload, exec_time, attempts FROM shardq.tasks WHERE status = 'dead'").fetchall()
    assert dead == [({"poison": True}, clock.now(), 1)]
    assert timed.stats("q")["dead"] == 1


def test_janitor_works_in_bounded_batches(dsn: str, client: Client, clock: ManualClock) -> None:
    with shardq.Client(dsn, clock=clock, janitor_batch=7) as small:
        small.enqueue_many("q", [{}] * 300)
        claim_everything(small)
        clock.advance(60)
        assert small.run_janitor_once().rescued == 300


def test_concurrent_janitors_rescue_each_task_once(dsn: str, timed: Client, clock: ManualClock,
                                                   connect: psycopg.Connection[Any]) -> None:
    timed.enqueue_many("q", [{}] * 3000)
    claim_everything(timed)
    clock.advance(60)
    reports: list[JanitorReport] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            with shardq.Client(dsn, clock=clock, janitor_batch=50) as c:
                reports.append(c.run_janitor_once())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(r.rescued for r in reports) == 3000
    assert connect.execute(
        "SELECT count(*) FROM shardq.tasks WHERE times_requeued = 1 AND status = 'available'"
    ).fetchone() == (3000,)


def test_janitor_loop_starts_and_stops_idempotently(timed: Client, clock: ManualClock) -> None:
    timed.enqueue("q", {})
    claim_everything(timed)
    clock.advance(60)
    janitor = shardq.Janitor(timed, interval_s=0.01)
    janitor.start()
    janitor.start()
    deadline = datetime.now(UTC).timestamp() + 10
    while timed.stats("q")["locked"] and datetime.now(UTC).timestamp() < deadline:
        threading.Event().wait(0.01)
    janitor.stop()
    janitor.stop()
    assert not janitor.running
    assert timed.stats("q")["locked"] == 0
