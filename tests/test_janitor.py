"""The janitor, driven by an injected clock: rescue, backoff, dead-lettering, concurrency."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, JanitorReport, ManualClock
from tests.helpers import TickingClock, bucket_of, claim_all, in_threads, query, wait_for

pytestmark = [pytest.mark.server,
              pytest.mark.client_settings(backoff_base_s=2, backoff_cap_s=100, backoff_jitter=0.25)]


def delays(conn: psycopg.Connection[Any], since: datetime) -> list[float]:
    rows = conn.execute("SELECT exec_time FROM shardq.tasks WHERE status = 'available'")
    return [(r[0] - since).total_seconds() for r in rows]


@pytest.fixture(autouse=True)
def no_results(connect: psycopg.Connection[tuple[object, ...]]) -> None:
    """Results outlive their tasks (the client fixture empties the tasks, not them):
    another test's, kept past these tests' clock, would expire in a janitor pass here and
    count in its report."""
    connect.execute("TRUNCATE shardq.results")


def test_nothing_to_do(timed: Client) -> None:
    assert timed.run_janitor_once() == JanitorReport()


def test_live_leases_are_left_alone(timed: Client, clock: ManualClock) -> None:
    timed.enqueue_many("q", [{}] * 50)
    assert len(claim_all(timed, "q", lease_s=10)) == 50
    clock.advance(9.999)
    assert timed.run_janitor_once() == JanitorReport()
    assert timed.stats("q")["locked"] == 50


def test_expired_leases_come_back_with_backoff(timed: Client, clock: ManualClock,
                                               connect: psycopg.Connection[Any]) -> None:
    timed.enqueue_many("q", [{}] * 200)
    claim_all(timed, "q", lease_s=10)
    clock.advance(10)
    report = timed.run_janitor_once()
    assert report == JanitorReport(rescued=200)
    # attempts = 1: base 2 s x 2^1 = 4 s, cut by at most 25 % jitter
    got = delays(connect, clock.now())
    assert len(got) == 200
    assert all(3.0 - 1e-6 <= d <= 4.0 + 1e-6 for d in got)
    assert len({round(d, 6) for d in got}) > 1  # jittered
    rows = connect.execute(
        "SELECT DISTINCT last_error, times_requeued, lease_token IS NULL FROM shardq.tasks"
    ).fetchall()
    assert rows == [("lease expired: the worker holding it died, stalled or overran its lease; "
                     "it runs alone next time", 1, True)]
    assert claim_all(timed, "q", lease_s=10) == []  # backing off
    clock.advance(4)
    tasks = claim_all(timed, "q", lease_s=10)
    assert len(tasks) == 200
    # A first expiry gives the attempt back (the task may never have reached a
    # handler) and leaves the task suspect.
    assert {t.attempts for t in tasks} == {1}
    assert {t.suspect for t in tasks} == {True}


def test_backoff_grows_and_is_capped(timed: Client, clock: ManualClock,
                                     connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("q", {}, max_attempts=20)
    for rescues in range(1, 9):
        [task] = claim_all(timed, "q", lease_s=1)
        # The first expiry gave its attempt back; every later one counted.
        attempts = max(1, rescues - 1)
        assert task.attempts == attempts
        clock.advance(1)
        assert timed.run_janitor_once().rescued == 1
        [delay] = delays(connect, clock.now())
        expected = min(100, 2 * 2**attempts)
        assert expected * 0.75 - 1e-6 <= delay <= expected + 1e-6
        clock.advance(delay)


def test_a_suspect_on_its_last_attempt_goes_dead(timed: Client, clock: ManualClock,
                                                 connect: psycopg.Connection[Any]) -> None:
    """A first expiry never kills (the attempt is given back); a suspect's second expiry
    on its last attempt does."""
    timed.enqueue("q", {"poison": True}, max_attempts=1)
    timed.enqueue("q", {"poison": False}, max_attempts=2)
    claim_all(timed, "q", lease_s=10)
    clock.advance(10)
    assert timed.run_janitor_once() == JanitorReport(rescued=2)
    clock.advance(3600)
    assert len(claim_all(timed, "q", lease_s=10)) == 2
    clock.advance(10)
    assert timed.run_janitor_once() == JanitorReport(rescued=1, dead=1)
    dead = connect.execute(
        "SELECT payload, exec_time, attempts FROM shardq.tasks WHERE status = 'dead'").fetchall()
    assert dead == [({"poison": True}, clock.now(), 1)]
    assert timed.stats("q")["dead"] == 1


def test_janitor_works_in_bounded_batches(dsn: str, client: Client, clock: ManualClock,
                                          connect: psycopg.Connection[Any]) -> None:
    # Each statement reads the ticking clock once and stamps its rows with that time, so
    # the rows sharing a last_requeued_at are one statement's batch.
    ticking = TickingClock(clock.now())
    with shardq.Client(dsn, clock=ticking, janitor_batch=7) as small:
        ids = small.enqueue_many("q", [{}] * 300)
        assert len(claim_all(small, "q", lease_s=10)) == 300
        ticking.advance(60)
        assert small.run_janitor_once().rescued == 300
    batches = query(connect, "SELECT bucket, count(*) FROM shardq.tasks "
                             "GROUP BY bucket, last_requeued_at")
    per_bucket = Counter(bucket_of(i) for i in ids)
    for bucket, size in per_bucket.items():
        # Full batches of 7 until the bucket's last, short one.
        full, rest = divmod(size, 7)
        expected = [7] * full + ([rest] if rest else [])
        assert sorted((n for b, n in batches if b == bucket), reverse=True) == expected
    assert sum(n for _, n in batches) == 300


def test_concurrent_janitors_rescue_each_task_once(dsn: str, timed: Client, clock: ManualClock,
                                                   connect: psycopg.Connection[Any]) -> None:
    timed.enqueue_many("q", [{}] * 3000)
    claim_all(timed, "q", lease_s=10)
    clock.advance(60)
    reports: list[JanitorReport] = []

    def one() -> None:
        with shardq.Client(dsn, clock=clock, janitor_batch=50) as c:
            reports.append(c.run_janitor_once())

    assert in_threads(*[one] * 4) == []
    assert sum(r.rescued for r in reports) == 3000
    assert connect.execute(
        "SELECT count(*) FROM shardq.tasks WHERE times_requeued = 1 AND status = 'available'"
    ).fetchone() == (3000,)


def test_janitor_loop_starts_and_stops_idempotently(timed: Client, clock: ManualClock) -> None:
    timed.enqueue("q", {})
    claim_all(timed, "q", lease_s=10)
    clock.advance(60)
    janitor = shardq.Janitor(timed, interval_s=0.01)
    janitor.start()
    janitor.start()
    wait_for(lambda: timed.stats("q")["locked"] == 0, timeout=10, interval=0.01,
             what="the janitor loop to rescue the task")
    janitor.stop()
    janitor.stop()
    assert not janitor.running
    assert timed.stats("q")["locked"] == 0
