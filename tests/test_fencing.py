"""Lease-token fencing: a worker whose lease moved on changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, LeaseLost, ManualClock
from tests.helpers import claim_all

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour,
              pytest.mark.client_settings(backoff_base_s=0.5, backoff_jitter=0)]


def reclaimed(client: Client, clock: ManualClock) -> tuple[shardq.Task, shardq.Task]:
    """A task claimed by worker A, expired, rescued and claimed again by worker B."""
    client.enqueue("q", {"v": 1})
    [a] = claim_all(client, "q", lease_s=5)
    clock.advance(5)
    assert client.run_janitor_once().rescued == 1
    clock.advance(1)
    [b] = claim_all(client, "q", lease_s=5)
    assert a.id == b.id
    assert a.lease_token != b.lease_token
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
    others = claim_all(timed, "q")
    assert len(others) == 2
    with pytest.raises(LeaseLost) as caught:
        timed.ack_many([*others, stale])
    assert caught.value.task_ids == [stale.id]
    assert [r[0] for r in connect.execute("SELECT id FROM shardq.tasks")] == [fresh.id]


def test_an_ack_repeated_changes_nothing_and_other_settles_are_lost(timed: Client) -> None:
    """An ack is idempotent (a retry after a lost reply must not report a lost lease):
    the task is finished either way.  Anything else on a finished task is refused."""
    timed.enqueue("q", {})
    [task] = claim_all(timed, "q")
    timed.ack(task)
    timed.ack(task)
    assert timed.get(task.id) is None
    late: dict[str, Callable[[], None]] = {
        "nack": partial(timed.nack, task, "late"), "extend": partial(timed.extend, task, 10),
        "release": partial(timed.release, task)}
    for settle in late.values():
        with pytest.raises(LeaseLost) as caught:
            settle()
        assert caught.value.task_ids == [task.id]


def test_a_nack_repeated_recognises_its_own_effect(timed: Client,
                                                   connect: psycopg.Connection[Any]) -> None:
    """A nack run again (as after a lost reply) finds the task back in line under its
    own token: it reports success and changes nothing more."""
    timed.enqueue("q", {})
    [task] = [t for b in range(timed.bucket_count) for t in timed.claim_bucket("q", b)]
    timed.nack(task, "boom", retry_in_s=0)
    before = connect.execute("SELECT exec_time, times_requeued FROM shardq.tasks").fetchall()
    timed.nack(task, "boom", retry_in_s=0)
    assert connect.execute(
        "SELECT exec_time, times_requeued FROM shardq.tasks").fetchall() == before
    # Once another claim took it, the old token is refused.
    [again] = [t for b in range(timed.bucket_count) for t in timed.claim_bucket("q", b)]
    assert again.lease_token != task.lease_token
    with pytest.raises(LeaseLost):
        timed.nack(task, "boom")


def test_expired_but_unclaimed_lease_may_still_finish(timed: Client, clock: ManualClock) -> None:
    """Nobody else holds the task yet, so the late worker's ack is still the only one."""
    timed.enqueue("q", {})
    [task] = claim_all(timed, "q", lease_s=1)
    clock.advance(30)
    timed.ack(task)
    assert timed.stats("q")["locked"] == 0


def test_same_task_twice_in_a_batch_is_refused(timed: Client) -> None:
    timed.enqueue("q", {})
    [task] = claim_all(timed, "q")
    with pytest.raises(shardq.InvalidTask):
        timed.ack_many([task, task])
    timed.ack(task)
