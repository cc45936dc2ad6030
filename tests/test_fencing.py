"""Lease-token fencing: a worker whose lease moved on changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, LeaseLost, ManualClock


@pytest.fixture
def timed(clocked: Callable[..., Client]) -> Client:
    return clocked(backoff_base_s=0.5, backoff_jitter=0)


def reclaimed(client: Client, clock: ManualClock) -> tuple[shardq.Task, shardq.Task]:
    """A task claimed by worker A, expired, rescued and claimed again by worker B."""
    client.enqueue("q", {"v": 1})
    [a] = [t for b in range(client.bucket_count) for t in client.claim_bucket("q", b, lease_s=5)]
    clock.advance(5)
    assert client.run_janitor_once().rescued == 1
    clock.advance(1)
    [b] = [t for i in range(client.bucket_count) for t in client.claim_bucket("q", i, lease_s=5)]
    assert a.id == b.id and a.lease_token != b.lease_token
    return a, b


def snapshot(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT * FROM shardq.tasks ORDER BY id").fetchall()


@pytest.mark.parametrize("operation", ["ack", "nack", "extend", "release", "defer"])
def test_stale_worker_changes_nothing(timed: Client, clock: ManualClock, operation: str,
                                      connect: psycopg.Connection[Any]) -> None:
    stale, fresh = reclaimed(timed, clock)
    before = snapshot(connect)
    calls = {
        "ack": lambda: timed.ack(stale),
        "nack": lambda: timed.nack(stale, "late"),
        "extend": lambda: timed.extend(stale, 60),
        "release": lambda: timed.release(stale),
        "defer": lambda: timed.defer(stale, delay_s=5),
    }
    with pytest.raises(LeaseLost) as caught:
        calls[operation]()
    assert caught.value.task_ids == [stale.id]
    assert snapshot(connect) == before
    timed.ack(fresh)  # the current holder still can
    assert snapshot(connect) == []


def test_batch_settles_the_valid_and_names_the_lost(timed: Client, clock: ManualClock,
                                                    connect: psycopg.Connection[Any]) -> None:
    stale, fresh = reclaimed(timed, clock)
    timed.enqueue_many("q", [{"v": 2}, {"v": 3}])
    others = [t for b in range(timed.bucket_count) for t in timed.claim_bucket("q", b)]
    assert len(others) == 2
    with pytest.raises(LeaseLost) as caught:
        timed.ack_many([*others, stale])
    assert caught.value.task_ids == [stale.id]
    assert [r[0] for r in connect.execute("SELECT id FROM shardq.tasks")] == [fresh.id]


def test_a_task_acked_twice_is_lost_the_second_time(timed: Client) -> None:
    timed.enqueue("q", {})
    [task] = [t for b in range(timed.bucket_count) for t in timed.claim_bucket("q", b)]
    timed.ack(task)
    with pytest.raises(LeaseLost):
        timed.ack(task)


def test_expired_but_unclaimed_lease_may_still_finish(timed: Client, clock: ManualClock) -> None:
    """Nobody else holds the task yet, so the late worker's ack is still the only one."""
    timed.enqueue("q", {})
    [task] = [t for b in range(timed.bucket_count) for t in timed.claim_bucket("q", b, lease_s=1)]
    clock.advance(30)
    timed.ack(task)
    assert timed.stats("q")["locked"] == 0


def test_same_task_twice_in_a_batch_is_refused(timed: Client) -> None:
    timed.enqueue("q", {})
    [task] = [t for b in range(timed.bucket_count) for t in timed.claim_bucket("q", b)]
    with pytest.raises(shardq.InvalidTask):
        timed.ack_many([task, task])
    timed.ack(task)
