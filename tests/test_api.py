"""Every API call's effect on the rows."""

from __future__ import annotations

import uuid
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, ManualClock
from shardq.core.dialect import bucket_sql
from shardq.core.task import TaskId
from shardq.ops.claims import RETURNED
from tests.helpers import bucket_of, claim_all, wait_for

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]


def row(conn: psycopg.Connection[Any], task_id: object) -> dict[str, Any]:
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    found = cur.execute("SELECT * FROM shardq.tasks WHERE id = %s", (task_id,)).fetchone()
    assert found is not None
    return found


def count(conn: psycopg.Connection[Any], where: str = "true") -> int:
    result = conn.execute("SELECT count(*) FROM shardq.tasks WHERE " + where).fetchone()
    assert result is not None
    return int(result[0])


def test_enqueue_writes_one_available_row(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("emails", {"to": "a@example.com"})
    r = row(connect, task_id)
    assert r["queue"] == "emails"
    assert r["status"] == "available"
    assert r["payload"] == {"to": "a@example.com"}
    assert r["attempts"] == 0
    assert r["max_attempts"] == 10
    assert r["times_claimed"] == 0
    assert r["times_requeued"] == 0
    assert r["exec_time"] == r["enqueued_at"]
    info = client.get(task_id)
    assert info is not None
    assert info.bucket == bucket_of(task_id, client.bucket_count)


def test_enqueue_many_copies_rows_with_shared_options(client: Client,
                                                      connect: psycopg.Connection[Any]) -> None:
    ids = client.enqueue_many("bulk", [{"n": i} for i in range(1000)], max_attempts=3, priority=7)
    assert len(ids) == len(set(ids)) == 1000
    assert count(connect, "queue = 'bulk' AND max_attempts = 3 AND priority = 7") == 1000
    assert count(connect, "exec_time = enqueued_at - interval '7 seconds'") == 1000
    payloads = {r[0] for r in connect.execute("SELECT (payload->>'n')::int FROM shardq.tasks")}
    assert payloads == set(range(1000))
    # The database computed every bucket from the id: into the stored column, or (after
    # a reshard) nowhere, the bucket being an expression of the id.
    if client.db.layout.bucket_column == "bucket":
        assert count(connect, "bucket = " + bucket_sql("id", 16)) == 1000
    assert client.enqueue_many("bulk", []) == []


@pytest.mark.parametrize(("run_at", "priority", "head_start"), [
    (datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), 5, 5),  # future: kept for later
    (datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), -3, 0),  # before 2000: negative
])
def test_enqueue_many_writes_exact_times_and_numbers(
        client: Client, connect: psycopg.Connection[Any], run_at: datetime, priority: int,
        head_start: int) -> None:
    """The COPY's fields are sent in binary: timestamps to the microsecond, on both sides
    of PostgreSQL's epoch, and signed integers."""
    client.enqueue_many("exact", [{}, {}], run_at=run_at, priority=priority, max_attempts=7)
    due = run_at if head_start else run_at - timedelta(seconds=priority)
    rows = connect.execute("SELECT exec_time, pending_head_start_s, max_attempts, priority "
                           "FROM shardq.tasks WHERE queue = 'exact'").fetchall()
    assert rows == [(due, head_start, 7, priority)] * 2


# Payloads that COPY's text format would misread if sent unescaped.
AWKWARD_PAYLOADS: list[Any] = [
    "back\\slash", "tab\tand\nnewline\r", "\\N", None, "", "é☃ and \u2028", ["\\", "\\\\"],
    {"nested": {"q": "\"quoted\"", "n": -1.5}}, 0, True, "\\.",
]


def test_enqueue_many_keeps_every_payload_exactly(client: Client) -> None:
    ids = client.enqueue_many("awkward", AWKWARD_PAYLOADS)
    assert [info.payload for info in map(client.get, ids) if info] == AWKWARD_PAYLOADS
    assert all(isinstance(i, TaskId) and i.version == 7 and not i.coalesced for i in ids)


@pytest.mark.blocking_client  # hands the client a blocking connection
def test_enqueue_in_callers_transaction_rolls_back(client: Client, dsn: str,
                                                   connect: psycopg.Connection[Any]) -> None:
    with psycopg.connect(dsn) as own:
        client.enqueue("tx", {"a": 1}, conn=own)
        client.enqueue_many("tx", [{"b": 2}], conn=own)
        assert count(connect, "queue = 'tx'") == 0  # not visible before commit
        own.rollback()
    assert count(connect, "queue = 'tx'") == 0
    with psycopg.connect(dsn) as own:  # a batch first: it opens the caller's transaction
        client.enqueue_many("tx", [{"b": 2}, {"b": 3}], conn=own)
        own.rollback()
    assert count(connect, "queue = 'tx'") == 0
    with psycopg.connect(dsn) as own:
        client.enqueue("tx", {"a": 1}, conn=own)
    assert count(connect, "queue = 'tx'") == 1  # committed with the caller's transaction
    with psycopg.connect(dsn, autocommit=True) as own:  # no caller's transaction: its own
        client.enqueue_many("tx", [{"b": 2}], conn=own)
    assert count(connect, "queue = 'tx'") == 2


@pytest.mark.blocking_client  # hands the client a blocking connection
def test_a_batch_wakes_listeners_once_and_only_when_it_commits(
        client: Client, dsn: str, connect: psycopg.Connection[Any]) -> None:
    connect.execute("LISTEN shardq")

    def heard() -> list[str]:
        connect.execute("SELECT 1")  # the notifications arrive with the next reply
        return [n.payload for n in connect.notifies(timeout=0.2)]

    client.enqueue_many("woken", [{"n": i} for i in range(3)])
    assert heard() == ["woken"]
    with pytest.raises(shardq.InvalidTask):  # a bad payload in the last chunk: all rolls back
        client.enqueue_many("woken", [{"n": i} for i in range(700)] + [{"x": float("nan")}])
    assert heard() == []
    with psycopg.connect(dsn) as own:
        client.enqueue_many("woken", [{"n": 1}], conn=own)
        own.rollback()
    assert heard() == []
    assert count(connect, "queue = 'woken'") == 3
    with shardq.Client(dsn, notify=False) as quiet:
        quiet.enqueue_many("woken", [{"n": 1}])
    assert heard() == []


def test_claim_locks_and_moves_the_row(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("q", {"x": 1})
    [task] = claim_all(client, "q", lease_s=45)
    assert task.id == task_id
    assert task.payload == {"x": 1}
    assert task.attempts == 1
    r = row(connect, task_id)
    assert r["status"] == "locked"
    assert r["lease_token"] == task.lease_token
    assert r["exec_time"] == task.exec_time == task.lease_expires_at
    assert r["exec_time"] - r["last_claimed_at"] == timedelta(seconds=45)
    assert r["first_claimed_at"] == r["last_claimed_at"]
    assert r["times_claimed"] == 1
    assert r["attempts"] == 1
    assert client.claim("q") == []  # nothing else eligible


def per_bucket(client: Client, n: int) -> dict[int, int]:
    """Enqueue ``n`` tasks on queue q; how many went to each bucket."""
    counts: dict[int, int] = {}
    for task_id in client.enqueue_many("q", [{} for _ in range(n)]):
        bucket = bucket_of(task_id, client.bucket_count)
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts


def test_claim_limit_and_bucket(client: Client) -> None:
    by_bucket = per_bucket(client, 200)
    bucket, size = max(by_bucket.items(), key=lambda kv: kv[1])
    first = client.claim_bucket("q", bucket, limit=size - 1)
    assert len(first) == size - 1
    assert {t.bucket for t in first} == {bucket}
    assert len(client.claim_bucket("q", bucket, limit=100)) == 1
    assert client.claim_bucket("q", bucket, limit=100) == []



def test_claim_buckets_reads_the_listed_buckets_in_their_order(client: Client) -> None:
    by_bucket = per_bucket(client, 200)
    (first, n_first), (second, n_second) = sorted(by_bucket.items(), key=lambda kv: -kv[1])[:2]
    # The limit reaches one task past the first bucket listed: it comes from the second.
    took = client.claim_buckets("q", [first, second], limit=n_first + 1)
    assert sorted(t.bucket for t in took) == sorted([first] * n_first + [second])
    rest = client.claim_buckets("q", [second, first], limit=100)
    assert [t.bucket for t in rest] == [second] * (n_second - 1)
    assert client.claim_buckets("q", [first, second], limit=100) == []
    others = claim_all(client, "q")  # the buckets not listed were left alone
    assert len(others) == 200 - n_first - n_second
    assert {t.bucket for t in others}.isdisjoint({first, second})
    assert len({t.lease_token for t in took}) == 1  # one claim, one lease token


def test_ack_deletes(client: Client, connect: psycopg.Connection[Any]) -> None:
    client.enqueue_many("q", [{"i": i} for i in range(30)])
    tasks = claim_all(client, "q")
    assert len(tasks) == 30
    client.ack(tasks[0])
    client.ack_many(tasks[1:])
    assert count(connect) == 0
    client.ack_many([])


def test_nack_backs_off_then_dies(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("q", {}, max_attempts=2)
    [task] = claim_all(client, "q")
    client.nack(task, "first failure")
    r = row(connect, task_id)
    assert r["status"] == "available"
    assert r["last_error"] == "first failure"
    assert r["times_requeued"] == 1
    # The row keeps the token of the claim whose failure it records: a retried nack
    # recognises its own effect by it (a new claim gives the task a new token).
    assert r["lease_token"] == task.lease_token
    info = client.get(task_id)
    assert info is not None
    assert info.lease_token is None  # no lease is held
    # base 1 s x 2^1, cut by at most 20 % jitter
    delay = (r["exec_time"] - r["last_requeued_at"]).total_seconds()
    assert 1.6 - 1e-6 <= delay <= 2.0 + 1e-6
    connect.execute("UPDATE shardq.tasks SET exec_time = now() - interval '1 s'")
    [task] = claim_all(client, "q")
    assert task.attempts == 2
    assert task.is_last_attempt
    client.nack(task, "second failure")
    r = row(connect, task_id)
    assert r["status"] == "dead"
    assert r["last_error"] == "second failure"
    assert client.stats("q")["dead"] == 1
    assert client.claim("q") == []


def test_nack_with_explicit_delay(client: Client, connect: psycopg.Connection[Any]) -> None:
    ids = client.enqueue_many("q", [{}, {}])
    tasks = claim_all(client, "q")
    client.nack_many(tasks, ["a", "b"], retry_in_s=[120, None])
    rows = {t.id: row(connect, t.id) for t in tasks}
    explicit = rows[tasks[0].id]
    assert explicit["exec_time"] - explicit["last_requeued_at"] == timedelta(seconds=120)
    assert {r["last_error"] for r in rows.values()} == {"a", "b"}
    assert set(ids) == set(rows)


def test_extend_moves_lease_and_keeps_task_addressable(client: Client,
                                                       connect: psycopg.Connection[Any]) -> None:
    client.enqueue("q", {})
    [task] = claim_all(client, "q", lease_s=10)
    before = task.exec_time
    client.extend(task, 300)
    assert task.exec_time > before
    assert row(connect, task.id)["exec_time"] == task.exec_time
    client.extend(task, 1)  # never shortens
    assert row(connect, task.id)["exec_time"] == task.exec_time
    client.ack(task)
    assert count(connect) == 0


def test_release_and_defer_take_back_the_attempt(client: Client,
                                                 connect: psycopg.Connection[Any]) -> None:
    client.enqueue_many("q", [{}, {}, {}])
    a, b, c = claim_all(client, "q")
    client.release(a)
    ra = row(connect, a.id)
    assert ra["status"] == "available"
    assert ra["attempts"] == 0
    assert ra["times_requeued"] == 1
    client.defer(b, delay_s=60)
    rb = row(connect, b.id)
    assert rb["exec_time"] - rb["last_requeued_at"] == timedelta(seconds=60)
    when = datetime.now(UTC) + timedelta(hours=2)
    client.defer(c, run_at=when)
    assert row(connect, c.id)["exec_time"] == when
    assert client.stats("q")["scheduled"] == 2
    assert [t.id for t in claim_all(client, "q")] == [a.id]


def test_get_reports_history(client: Client) -> None:
    task_id = client.enqueue("q", {"k": "v"})
    [task] = claim_all(client, "q")
    client.nack(task, "boom", retry_in_s=0)
    [task] = claim_all(client, "q")
    info = client.get(task_id)
    assert info is not None
    assert info.state == "locked"
    assert info.times_claimed == 2
    assert info.times_requeued == 1
    assert info.last_error == "boom"
    assert info.lease_token == task.lease_token
    assert info.first_claimed_at is not None
    assert info.last_claimed_at is not None
    assert info.first_claimed_at < info.last_claimed_at
    client.ack(task)
    assert client.get(task_id) is None
    assert client.get(str(task_id)) is None
    with pytest.raises(shardq.InvalidTask):
        client.get("not-a-uuid")


def test_stats(timed: Client, clock: ManualClock) -> None:
    empty = timed.stats("empty")
    assert {k: empty[k] for k in ("available", "scheduled", "locked", "dead",
                                  "oldest_eligible_age_s")} == \
        {"available": 0, "scheduled": 0, "locked": 0, "dead": 0, "oldest_eligible_age_s": None}
    timed.enqueue_many("s", [{}] * 5)
    clock.advance(30)
    timed.enqueue("s", {}, delay_s=3600)
    timed.enqueue("other", {})
    claim_all(timed, "s", most=2, limit=1)
    clock.advance(12.5)
    stats = timed.stats("s")
    assert stats["available"] == 3
    assert stats["scheduled"] == 1
    assert stats["locked"] == 2
    assert stats["dead"] == 0
    assert stats["oldest_eligible_age_s"] == 42.5  # the first five were enqueued 42.5 s ago


def test_queues_are_separate(client: Client) -> None:
    client.enqueue("a", {"q": "a"})
    client.enqueue("b", {"q": "b"})
    assert [t.payload for t in claim_all(client, "a")] == [{"q": "a"}]
    assert client.claim("a") == []
    assert [t.payload for t in claim_all(client, "b")] == [{"q": "b"}]


def test_nack_dead_buries_at_once(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("q", {}, max_attempts=5)
    [task] = claim_all(client, "q")
    client.nack(task, "poison", dead=True)
    r = row(connect, task_id)
    assert r["status"] == "dead"
    assert r["attempts"] == 1
    assert r["last_error"] == "poison"


def test_settling_addresses_rows_whatever_the_queue_is_named(client: Client,
                                                            connect: psycopg.Connection[Any]
                                                            ) -> None:
    """Claimed tasks are addressed through array literals: a queue named NULL must not
    read as a null, nor a name with punctuation break the literal."""
    for queue in ("NULL", "a.b:c-d_e"):
        client.enqueue_many(queue, [{"n": i} for i in range(3)])
        first, second, third = claim_all(client, queue)
        client.extend_many([first], 60)
        client.ack_many([first])
        client.nack_many([second], ["boom"], dead=[True])
        client.release_many([third])
        states = dict(connect.execute(
            "SELECT status, count(*) FROM shardq.tasks WHERE queue = %s GROUP BY 1",
            (queue,)).fetchall())
        assert states == {"dead": 1, "available": 1}


ODD_PAYLOADS: list[Any] = [None, True, 0, -1.5, 2**70, "", "quote \" and \\ backslash",
                           "\U0001f600 \u2028 \u00e9", [], [1, [2, {"a": None}]],
                           {"nested": {"k": ["v", 1e-7]}, "": 0}]


def test_claimed_payloads_are_what_was_enqueued(client: Client) -> None:
    """A claim reads payloads as JSON text and decodes them itself: every kind of JSON
    value comes back equal, from a single enqueue and from a COPY batch."""
    singles = [client.enqueue("odd", p) for p in ODD_PAYLOADS]
    batch = client.enqueue_many("odd", ODD_PAYLOADS)
    claimed = {t.id: t.payload for t in claim_all(client, "odd")}
    assert [claimed[i] for i in singles] == ODD_PAYLOADS
    assert [claimed[i] for i in batch] == ODD_PAYLOADS


def test_a_claim_returns_the_task_fields_in_order(client: Client, dsn: str) -> None:
    """Claimed rows become Tasks positionally (shardq.ops.claims.task_rows)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        st = client.statements
        cur = conn.execute(st.query("claim", 1), st.params(queue="q", bucket=0, lease_s=30.0,
                                                              token=uuid.uuid4(),
                                                              worker_id=None))
        assert cur.description is not None
        assert [c.name for c in cur.description] == list(RETURNED)
    assert [f.name for f in fields(shardq.Task)][:5] == ["id", "queue", "bucket", "exec_time",
                                                         "lease_token"]


def test_defer_many_puts_each_task_back_for_later(client: Client,
                                                  connect: psycopg.Connection[Any]) -> None:
    client.enqueue_many("q", [{}, {}, {}])
    a, b, c = claim_all(client, "q")
    client.defer_many([a, b], delay_s=60)
    for task in (a, b):
        deferred = row(connect, task.id)
        assert deferred["status"] == "available"
        assert deferred["attempts"] == 0  # a deferral gives the attempt back
        assert deferred["exec_time"] - deferred["last_requeued_at"] == timedelta(seconds=60)
    assert row(connect, c.id)["status"] == "locked"
    when = datetime.now(UTC) + timedelta(hours=2)
    client.defer_many([c], run_at=when)
    assert row(connect, c.id)["exec_time"] == when
    assert client.stats("q")["scheduled"] == 3


def test_controls_reads_the_limits_of_several_queues_at_once(client: Client) -> None:
    client.enqueue_many("limited", [{}, {}])
    client.set_limits("limited", max_running=5, create=True)
    client.enqueue("free", {})
    controls = client.controls(["limited", "free"])
    assert set(controls) == {"limited", "free"}
    assert controls["limited"].limits.max_running == 5
    assert controls["limited"].controlled
    assert controls["free"].limits.max_running is None
    assert controls["limited"] == client.limits("limited")


def test_the_janitor_loop_puts_back_what_an_expired_lease_held(client: Client) -> None:
    task_id = client.enqueue("q", {})
    claim_all(client, "q", lease_s=0.001)
    janitor = client.janitor(interval_s=0.05)
    janitor.start()
    janitor.start()  # idempotent
    try:
        wait_for(lambda: client.stats("q")["available"] == 1, 30, 0.05,
                 what="the janitor to put the task back")
        assert janitor.running
    finally:
        janitor.stop()
        janitor.stop()
    assert not janitor.running
    assert [t.id for t in claim_all(client, "q")] == [task_id]
