"""Keyed tasks: exclusivity, coalescing, follow-ups, merges — enforced by the database."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, ManualClock
from tests.helpers import claim_all, in_threads

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour,
              pytest.mark.client_settings(backoff_base_s=1, backoff_jitter=0)]


def rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT key, status, payload FROM shardq.tasks ORDER BY status, key"
                        ).fetchall()


def test_waiting_key_coalesces(timed: Client, clock: ManualClock,
                               connect: psycopg.Connection[Any]) -> None:
    first = timed.enqueue("p", {"v": 1}, key="profile:42", delay_s=60)
    clock.advance(1)
    second = timed.enqueue("p", {"v": 2}, key="profile:42")
    clock.advance(1)
    third = timed.enqueue("p", {"v": 3}, key="profile:42", delay_s=600)
    assert not first.coalesced
    assert second.coalesced
    assert third.coalesced
    assert first == second == third
    [(payload, exec_time)] = connect.execute(
        "SELECT payload, exec_time FROM shardq.tasks").fetchall()
    assert payload == {"v": 3}  # the latest payload
    assert exec_time == clock.now() - timedelta(seconds=1)  # the earliest place in line
    other = timed.enqueue("p", {"v": 9}, key="profile:43")
    assert not other.coalesced
    assert other != first
    assert timed.enqueue("other-queue", {}, key="profile:42").coalesced is False


def test_cmb_story_follow_up_runs_once_with_the_latest_payload(
        timed: Client, connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("p", {"prefs": "v1"}, key="profile:7")
    [running] = claim_all(timed, "p")
    # The user changes preferences twice while the task runs.
    a = timed.enqueue("p", {"prefs": "v2"}, key="profile:7")
    b = timed.enqueue("p", {"prefs": "v3"}, key="profile:7")
    assert not a.coalesced
    assert b.coalesced
    assert a == b
    assert claim_all(timed, "p") == []  # never in parallel with its predecessor
    assert rows(connect) == [("profile:7", "available", {"prefs": "v3"}),
                             ("profile:7", "locked", {"prefs": "v1"})]
    timed.ack(running)
    [follow_up] = claim_all(timed, "p")  # claimable as soon as the ack committed
    assert follow_up.payload == {"prefs": "v3"}
    assert follow_up.id == a
    timed.ack(follow_up)
    assert rows(connect) == []
    assert claim_all(timed, "p") == []


def test_failed_task_merges_with_its_follow_up(timed: Client, clock: ManualClock,
                                               connect: psycopg.Connection[Any]) -> None:
    original = timed.enqueue("p", {"v": "old"}, key="k")
    [running] = claim_all(timed, "p")
    follow = timed.enqueue("p", {"v": "new"}, key="k")
    timed.nack(running, "boom")
    [(task_id, status, payload, attempts, error, requeued)] = connect.execute(
        "SELECT id, status, payload, attempts, last_error, times_requeued FROM shardq.tasks"
    ).fetchall()
    assert (task_id, status, payload) == (follow, "available", {"v": "new"})
    assert (attempts, error, requeued) == (1, "boom", 1)  # the retry's history
    assert task_id != original
    assert claim_all(timed, "p") == []  # backing off (1 s x 2^1)
    clock.advance(2)
    [again] = claim_all(timed, "p")
    assert again.payload == {"v": "new"}
    assert again.attempts == 2


def test_expired_lease_merges_with_its_follow_up(timed: Client, clock: ManualClock,
                                                 connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("p", {"v": 1}, key="k")
    claim_all(timed, "p", lease_s=5)
    timed.enqueue("p", {"v": 2}, key="k")
    timed.enqueue("p", {"v": 0}, key="unrelated")
    clock.advance(5)
    assert timed.run_janitor_once().rescued == 1
    assert rows(connect) == [("k", "available", {"v": 2}),
                             ("unrelated", "available", {"v": 0})]
    info = connect.execute("SELECT last_error, attempts FROM shardq.tasks WHERE key = 'k'"
                           ).fetchone()
    assert info is not None
    assert info[0].startswith("lease expired")
    assert info[1] == 0  # a first expiry gives the attempt back, as for unkeyed tasks


def test_dead_task_frees_its_follow_up(timed: Client, connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("p", {"v": 1}, key="k", max_attempts=1)
    [running] = claim_all(timed, "p")
    timed.enqueue("p", {"v": 2}, key="k")
    timed.nack(running, "fatal")
    assert rows(connect) == [("k", "available", {"v": 2}), ("k", "dead", {"v": 1})]
    [follow] = claim_all(timed, "p")
    assert follow.payload == {"v": 2}


def test_release_and_defer_merge_without_penalty(timed: Client, clock: ManualClock,
                                                 connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("p", {"v": 1}, key="k")
    [running] = claim_all(timed, "p")
    timed.enqueue("p", {"v": 2}, key="k")
    timed.defer(running, delay_s=30)
    [(payload, attempts, exec_time)] = connect.execute(
        "SELECT payload, attempts, exec_time FROM shardq.tasks").fetchall()
    assert payload == {"v": 2}
    assert attempts == 0
    assert exec_time == clock.now() + timedelta(seconds=30)
    clock.advance(30)
    [running] = claim_all(timed, "p")
    timed.release(running)
    assert connect.execute("SELECT status, attempts FROM shardq.tasks").fetchall() == [
        ("available", 0)]


def test_batch_keys_coalesce(timed: Client, connect: psycopg.Connection[Any]) -> None:
    ids = timed.enqueue_many("p", [{"n": n} for n in range(6)],
                             keys=["a", "b", "a", None, "b", "a"])
    assert [i.coalesced for i in ids] == [True, True, True, False, False, False]
    assert ids[0] == ids[2] == ids[5]
    assert ids[1] == ids[4]
    assert {r[0]: r[2] for r in rows(connect)} == {"a": {"n": 5}, "b": {"n": 4}, None: {"n": 3}}
    again = timed.enqueue_many("p", [{"n": 6}], keys=["a"])
    assert again[0] == ids[0]
    assert again[0].coalesced


def test_the_database_refuses_two_running_tasks_of_a_key(
        timed: Client, connect: psycopg.Connection[Any]) -> None:
    timed.enqueue("p", {}, key="k")
    claim_all(timed, "p")
    timed.enqueue("p", {}, key="k")
    with pytest.raises(psycopg.errors.UniqueViolation):
        connect.execute("UPDATE shardq.tasks SET status = 'locked' WHERE status = 'available'")
    with pytest.raises(psycopg.errors.UniqueViolation):
        connect.execute("INSERT INTO shardq.tasks (queue, key, payload) VALUES ('p', 'k', '{}')")


def test_keyed_task_functions(dsn: str, client: Client) -> None:
    app = shardq.App(dsn)

    @app.task(queue="profiles")
    def refresh(profile_id: int) -> None: ...

    first = refresh.enqueue(1, key="profile:1")
    again = refresh.enqueue(1, key="profile:1")
    assert not first.coalesced
    assert again.coalesced
    assert again == first
    batch = refresh.enqueue_many([(2,), (2,)], keys=["profile:2", "profile:2"])
    assert batch[0] == batch[1]
    assert batch[0].coalesced
    info = client.get(first)
    assert info is not None
    assert info.key == "profile:1"
    app.client.close()


def test_bad_keys(client: Client, connect: psycopg.Connection[Any]) -> None:
    for bad in ("", "x" * 513, 7):
        with pytest.raises(shardq.InvalidTask):
            client.enqueue("p", {}, key=bad)  # type: ignore[arg-type]
    with pytest.raises(shardq.InvalidTask):
        client.enqueue_many("p", [{}, {}], keys=["a"])
    assert connect.execute("SELECT count(*) FROM shardq.tasks").fetchone() == (0,)


def test_concurrent_batches_of_the_same_keys_never_deadlock(dsn: str, client: Client) -> None:
    keys = [f"k{i}" for i in range(200)]

    def produce(order: list[str]) -> None:
        with shardq.Client(dsn) as c:
            for round_ in range(15):
                c.enqueue_many("p", [{"r": round_}] * len(order), keys=order)

    orders = (keys, keys[::-1], keys[100:] + keys[:100], keys[::-1])
    assert in_threads(*(functools.partial(produce, order) for order in orders)) == []
    assert client.stats("p")["available"] == len(keys)
