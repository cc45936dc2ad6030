"""Ordering: exec_time is the place in line; delays are exact; priority is a head start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, ManualClock
from tests.helpers import claim_all, wait_for

pytestmark = pytest.mark.server


def drain(client: Client, queue: str) -> list[Any]:
    """Payloads in the order a single claimer gets them, bucket by bucket (each ordered)."""
    return [t.payload for t in claim_all(client, queue)]


def exec_times(conn: psycopg.Connection[Any]) -> dict[str, datetime]:
    rows = conn.execute("SELECT payload->>'name', exec_time FROM shardq.tasks").fetchall()
    return {name: when for name, when in rows}


def test_claims_follow_exec_time_within_a_bucket(timed: Client, clock: ManualClock) -> None:
    ids = []
    for i in range(300):
        ids.append(timed.enqueue("q", {"i": i}))
        clock.advance(0.001)
    for bucket in range(timed.bucket_count):
        got = [t.payload["i"] for t in timed.claim_bucket("q", bucket, limit=1000)]
        assert got == sorted(got)


def test_delay_is_a_not_before_time(timed: Client, clock: ManualClock) -> None:
    start = clock.now()
    timed.enqueue("q", {"name": "later"}, delay_s=30)
    timed.enqueue("q", {"name": "at"}, run_at=start + timedelta(seconds=60))
    assert drain(timed, "q") == []
    clock.advance(29.999)
    assert drain(timed, "q") == []
    clock.advance(0.001)
    assert drain(timed, "q") == [{"name": "later"}]
    clock.advance(29.999)
    assert drain(timed, "q") == []
    clock.advance(0.001)
    assert drain(timed, "q") == [{"name": "at"}]


def test_priority_is_a_head_start(timed: Client, clock: ManualClock,
                                  connect: psycopg.Connection[Any]) -> None:
    t0 = clock.now()
    timed.enqueue("q", {"name": "old"})
    clock.advance(10)
    timed.enqueue("q", {"name": "urgent"}, priority=30)
    timed.enqueue("q", {"name": "mild"}, priority=5)
    timed.enqueue("q", {"name": "plain"})
    placed = exec_times(connect)
    assert placed["old"] == t0
    assert placed["urgent"] == t0 + timedelta(seconds=10 - 30)  # ahead of "old"
    assert placed["mild"] == t0 + timedelta(seconds=5)  # behind "old", ahead of "plain"
    assert placed["plain"] == t0 + timedelta(seconds=10)


def test_negative_priority_moves_back(timed: Client, clock: ManualClock,
                                      connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("q", {"name": "patient"}, priority=-20)
    assert exec_times(connect)["patient"] == clock.now() + timedelta(seconds=20)
    assert drain(timed, "q") == []
    clock.advance(20)
    assert drain(timed, "q") == [{"name": "patient"}]


def test_scheduled_head_start_waits_for_run_at(timed: Client, clock: ManualClock,
                                               connect: psycopg.Connection[Any]) -> None:
    t0 = clock.now()
    timed.enqueue("q", {"name": "backlog"})
    timed.enqueue("q", {"name": "sched"}, delay_s=60, priority=600)
    placed = exec_times(connect)
    assert placed["sched"] == t0 + timedelta(seconds=60)  # out of reach until due
    assert timed.stats("q")["scheduled"] == 1
    clock.advance(59)
    assert timed.run_janitor_once().promoted == 0
    assert drain(timed, "q") == [{"name": "backlog"}]
    timed.enqueue("q", {"name": "newer"})  # enqueued at t0 + 59
    clock.advance(1)
    report = timed.run_janitor_once()
    assert report.promoted == 1
    assert exec_times(connect)["sched"] == t0 + timedelta(seconds=60 - 600)
    info = [r for r in connect.execute(
        "SELECT pending_head_start_s, priority FROM shardq.tasks WHERE payload->>'name' = 'sched'")]
    assert info == [(0, 600)]
    assert timed.run_janitor_once().promoted == 0  # applied once


def test_due_scheduled_task_runs_even_before_its_head_start_is_applied(
        timed: Client, clock: ManualClock) -> None:
    timed.enqueue("q", {"name": "sched"}, delay_s=5, priority=100)
    clock.advance(5)
    [task] = claim_all(timed, "q")
    assert task.payload == {"name": "sched"}
    # The claim cleared the pending head start: the janitor must not move the lease.
    assert timed.run_janitor_once().promoted == 0
    info = timed.get(task.id)
    assert info is not None
    assert info.pending_head_start_s == 0
    assert info.state == "locked"


def test_run_at_in_the_past_is_a_place_in_line(timed: Client, clock: ManualClock,
                                               connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("q", {"name": "late"}, run_at=clock.now() - timedelta(hours=1), priority=10)
    assert exec_times(connect)["late"] == clock.now() - timedelta(hours=1, seconds=10)


def test_real_clock_never_runs_a_task_early(client: Client) -> None:
    run_at = datetime.now(UTC) + timedelta(seconds=1.5)
    client.enqueue("q", {}, run_at=run_at)
    claimed: list[shardq.Task] = []

    def claimed_one() -> bool:
        claimed.extend(client.claim("q"))
        return bool(claimed)

    # Claims run in a tight loop: one that came too early would show.
    wait_for(claimed_one, timeout=6.5, interval=0.001, what="the task to come due")
    assert claimed[0].enqueued_at < run_at
    info = client.get(claimed[0].id)
    assert info is not None
    assert info.last_claimed_at is not None
    assert info.last_claimed_at >= run_at
