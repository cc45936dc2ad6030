"""Every API call's effect on the rows."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client
from shardq.task import TaskId


def row(conn: psycopg.Connection[Any], task_id: object) -> dict[str, Any]:
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    found = cur.execute("SELECT * FROM shardq.tasks WHERE id = %s", (task_id,)).fetchone()
    assert found is not None
    return found


def count(conn: psycopg.Connection[Any], where: str = "true") -> int:
    result = conn.execute("SELECT count(*) FROM shardq.tasks WHERE " + where).fetchone()
    assert result is not None
    return int(result[0])


def claim_all(client: Client, queue: str, n: int, *, limit: int | None = None,
              lease_s: float | None = None) -> list[shardq.Task]:
    """Claim until ``n`` tasks are held (claims take one bucket at a time)."""
    tasks: list[shardq.Task] = []
    for _ in range(client.bucket_count * 4):
        step = min(limit or n, n - len(tasks))
        tasks += client.claim(queue, limit=step, lease_s=lease_s)
        if len(tasks) >= n:
            break
    return tasks


def test_enqueue_writes_one_available_row(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("emails", {"to": "a@example.com"})
    r = row(connect, task_id)
    assert r["queue"] == "emails"
    assert r["status"] == "available"
    assert r["payload"] == {"to": "a@example.com"}
    assert r["attempts"] == 0 and r["max_attempts"] == 10
    assert r["times_claimed"] == 0 and r["times_requeued"] == 0
    assert r["exec_time"] == r["enqueued_at"]
    assert r["bucket"] == int.from_bytes(task_id.bytes[14:16], "big") % 16


def test_enqueue_many_copies_rows_with_shared_options(client: Client,
                                                      connect: psycopg.Connection[Any]) -> None:
    ids = client.enqueue_many("bulk", [{"n": i} for i in range(1000)], max_attempts=3, priority=7)
    assert len(ids) == len(set(ids)) == 1000
    assert count(connect, "queue = 'bulk' AND max_attempts = 3 AND priority = 7") == 1000
    assert count(connect, "exec_time = enqueued_at - interval '7 seconds'") == 1000
    payloads = {r[0] for r in connect.execute("SELECT (payload->>'n')::int FROM shardq.tasks")}
    assert payloads == set(range(1000))
    # The database computed every bucket from the id.
    assert count(connect, "bucket = mod(get_byte(uuid_send(id), 14) * 256 "
                          "+ get_byte(uuid_send(id), 15), 16)") == 1000
    assert client.enqueue_many("bulk", []) == []


# Payloads that COPY's text format would misread if sent unescaped.
AWKWARD_PAYLOADS: list[Any] = [
    "back\\slash", "tab\tand\nnewline\r", "\\N", None, "", "é☃ and \u2028", ["\\", "\\\\"],
    {"nested": {"q": "\"quoted\"", "n": -1.5}}, 0, True, "\\.",
]


def test_enqueue_many_keeps_every_payload_exactly(client: Client) -> None:
    ids = client.enqueue_many("awkward", AWKWARD_PAYLOADS)
    assert [info.payload for info in map(client.get, ids) if info] == AWKWARD_PAYLOADS
    assert all(isinstance(i, TaskId) and i.version == 4 and not i.coalesced for i in ids)


def test_enqueue_in_callers_transaction_rolls_back(client: Client, dsn: str,
                                                   connect: psycopg.Connection[Any]) -> None:
    with psycopg.connect(dsn) as own:
        client.enqueue("tx", {"a": 1}, conn=own)
        client.enqueue_many("tx", [{"b": 2}], conn=own)
        assert count(connect, "queue = 'tx'") == 0  # not visible before commit
        own.rollback()
    assert count(connect, "queue = 'tx'") == 0
    with psycopg.connect(dsn) as own:
        client.enqueue("tx", {"a": 1}, conn=own)
    assert count(connect, "queue = 'tx'") == 1  # committed with the caller's transaction


def test_claim_locks_and_moves_the_row(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("q", {"x": 1})
    [task] = claim_all(client, "q", 1, lease_s=45)
    assert task.id == task_id and task.payload == {"x": 1} and task.attempts == 1
    r = row(connect, task_id)
    assert r["status"] == "locked"
    assert r["lease_token"] == task.lease_token
    assert r["exec_time"] == task.exec_time == task.lease_expires_at
    assert r["exec_time"] - r["last_claimed_at"] == timedelta(seconds=45)
    assert r["first_claimed_at"] == r["last_claimed_at"]
    assert r["times_claimed"] == 1 and r["attempts"] == 1
    assert client.claim("q") == []  # nothing else eligible


def test_claim_limit_and_bucket(client: Client) -> None:
    ids = client.enqueue_many("q", [{} for _ in range(200)])
    by_bucket: dict[int, int] = {}
    for i in ids:
        b = int.from_bytes(i.bytes[14:16], "big") % client.bucket_count
        by_bucket[b] = by_bucket.get(b, 0) + 1
    bucket, size = max(by_bucket.items(), key=lambda kv: kv[1])
    first = client.claim_bucket("q", bucket, limit=size - 1)
    assert len(first) == size - 1 and {t.bucket for t in first} == {bucket}
    assert len(client.claim_bucket("q", bucket, limit=100)) == 1
    assert client.claim_bucket("q", bucket, limit=100) == []


def test_ack_deletes(client: Client, connect: psycopg.Connection[Any]) -> None:
    client.enqueue_many("q", [{"i": i} for i in range(30)])
    tasks = claim_all(client, "q", 30, limit=30)
    client.ack(tasks[0])
    client.ack_many(tasks[1:])
    assert count(connect) == 0
    client.ack_many([])


def test_nack_backs_off_then_dies(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("q", {}, max_attempts=2)
    [task] = claim_all(client, "q", 1)
    client.nack(task, "first failure")
    r = row(connect, task_id)
    assert r["status"] == "available" and r["last_error"] == "first failure"
    assert r["times_requeued"] == 1 and r["lease_token"] is None
    # base 1 s x 2^1, cut by at most 20 % jitter
    delay = (r["exec_time"] - r["last_requeued_at"]).total_seconds()
    assert 1.6 - 1e-6 <= delay <= 2.0 + 1e-6
    connect.execute("UPDATE shardq.tasks SET exec_time = now() - interval '1 s'")
    [task] = claim_all(client, "q", 1)
    assert task.attempts == 2 and task.is_last_attempt
    client.nack(task, "second failure")
    r = row(connect, task_id)
    assert r["status"] == "dead" and r["last_error"] == "second failure"
    assert client.stats("q")["dead"] == 1
    assert client.claim("q") == []


def test_nack_with_explicit_delay(client: Client, connect: psycopg.Connection[Any]) -> None:
    ids = client.enqueue_many("q", [{}, {}])
    tasks = claim_all(client, "q", 2)
    client.nack_many(tasks, ["a", "b"], retry_in_s=[120, None])
    rows = {t.id: row(connect, t.id) for t in tasks}
    explicit = rows[tasks[0].id]
    assert explicit["exec_time"] - explicit["last_requeued_at"] == timedelta(seconds=120)
    assert {r["last_error"] for r in rows.values()} == {"a", "b"}
    assert set(ids) == set(rows)


def test_extend_moves_lease_and_keeps_task_addressable(client: Client,
                                                       connect: psycopg.Connection[Any]) -> None:
    client.enqueue("q", {})
    [task] = claim_all(client, "q", 1, lease_s=10)
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
    a, b, c = claim_all(client, "q", 3)
    client.release(a)
    ra = row(connect, a.id)
    assert ra["status"] == "available" and ra["attempts"] == 0 and ra["times_requeued"] == 1
    client.defer(b, delay_s=60)
    rb = row(connect, b.id)
    assert rb["exec_time"] - rb["last_requeued_at"] == timedelta(seconds=60)
    when = datetime.now(UTC) + timedelta(hours=2)
    client.defer(c, run_at=when)
    assert row(connect, c.id)["exec_time"] == when
    assert client.stats("q")["scheduled"] == 2
    assert [t.id for t in claim_all(client, "q", 1)] == [a.id]


def test_get_reports_history(client: Client) -> None:
    task_id = client.enqueue("q", {"k": "v"})
    [task] = claim_all(client, "q", 1)
    client.nack(task, "boom", retry_in_s=0)
    [task] = claim_all(client, "q", 1)
    info = client.get(task_id)
    assert info is not None
    assert info.state == "locked" and info.times_claimed == 2 and info.times_requeued == 1
    assert info.last_error == "boom" and info.lease_token == task.lease_token
    assert info.first_claimed_at is not None and info.last_claimed_at is not None
    assert info.first_claimed_at < info.last_claimed_at
    client.ack(task)
    assert client.get(task_id) is None
    assert client.get(str(task_id)) is None
    with pytest.raises(shardq.ConfigError):
        client.get("not-a-uuid")


def test_stats(client: Client) -> None:
    assert client.stats("empty") == {"available": 0, "scheduled": 0, "locked": 0, "dead": 0,
                                     "oldest_eligible_age_s": None}
    client.enqueue_many("s", [{}] * 5)
    client.enqueue("s", {}, delay_s=3600)
    client.enqueue("other", {})
    claim_all(client, "s", 2, limit=1)
    stats = client.stats("s")
    assert stats["available"] == 3 and stats["scheduled"] == 1 and stats["locked"] == 2
    assert stats["dead"] == 0 and stats["oldest_eligible_age_s"] >= 0


def test_queues_are_separate(client: Client) -> None:
    client.enqueue("a", {"q": "a"})
    client.enqueue("b", {"q": "b"})
    assert [t.payload for t in claim_all(client, "a", 1)] == [{"q": "a"}]
    assert client.claim("a") == []
    assert [t.payload for t in claim_all(client, "b", 1)] == [{"q": "b"}]


def test_nack_dead_buries_at_once(client: Client, connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("q", {}, max_attempts=5)
    [task] = claim_all(client, "q", 1)
    client.nack(task, "poison", dead=True)
    r = row(connect, task_id)
    assert r["status"] == "dead" and r["attempts"] == 1 and r["last_error"] == "poison"


def test_settling_addresses_rows_whatever_the_queue_is_named(client: Client,
                                                            connect: psycopg.Connection[Any]
                                                            ) -> None:
    """Claimed tasks are addressed through array literals: a queue named NULL must not
    read as a null, nor a name with punctuation break the literal."""
    for queue in ("NULL", "a.b:c-d_e"):
        client.enqueue_many(queue, [{"n": i} for i in range(3)])
        first, second, third = claim_all(client, queue, 3)
        client.extend_many([first], 60)
        client.ack_many([first])
        client.nack_many([second], ["boom"], dead=[True])
        client.release_many([third])
        states = dict(connect.execute(
            "SELECT status, count(*) FROM shardq.tasks WHERE queue = %s GROUP BY 1",
            (queue,)).fetchall())
        assert states == {"dead": 1, "available": 1}


def test_a_claim_returns_the_task_fields_in_order(client: Client, dsn: str) -> None:
    """Claimed rows become Tasks positionally (shardq.client.TASK_ROW)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(client._query("claim", 1),
                           client._params(queue="q", bucket=0, lease_s=30.0))
        assert cur.description is not None
        assert [c.name for c in cur.description] == [f.name for f in fields(shardq.Task)]
