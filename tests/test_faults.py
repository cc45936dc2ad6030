"""Faults at the database boundary: deadlines, connection failures, and statements that
are safe to run twice (what a retry after a lost reply does)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client
from shardq.core.db import Database
from shardq.core.deadline import Watchdog
from shardq.core.dialect import COCKROACHDB, POSTGRESQL
from shardq.core.errors import ConfigError, ConnectionLost, Unavailable
from shardq.core.task import TaskId
from tests.helpers import free_port, with_dbname, with_user

pytestmark = pytest.mark.server


def test_a_statement_past_its_deadline_drops_its_connection(dsn: str) -> None:
    db = Database(dsn, max_size=2, statement_timeout_s=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(ConnectionLost, match=r"overran its deadline of 0\.5s"):
            db.run(lambda c: c.execute("SELECT pg_sleep(30)").fetchone(), idempotent=False)
        assert time.monotonic() - started < 5
        # The pool hands out a working connection afterwards.
        assert db.run(lambda c: c.execute("SELECT 1").fetchone()) == (1,)
    finally:
        db.close()


def test_idempotent_work_past_its_deadline_is_retried_then_reported(dsn: str) -> None:
    db = Database(dsn, max_size=2, statement_timeout_s=0.3)
    tries = 0

    def work(c: psycopg.Connection[Any]) -> Any:
        nonlocal tries
        tries += 1
        return c.execute("SELECT pg_sleep(30)").fetchone()

    try:
        with pytest.raises(ConnectionLost):
            db.run(work)
        assert tries > 1
    finally:
        db.close()


def test_work_that_finishes_in_time_is_not_cut(dsn: str) -> None:
    db = Database(dsn, max_size=1, statement_timeout_s=5)
    try:
        assert db.run(lambda c: c.execute("SELECT pg_sleep(0.2), 7").fetchone()) == ("", 7)
    finally:
        db.close()


def test_a_short_deadline_strikes_while_a_longer_one_is_waiting(dsn: str) -> None:
    """The watchdog sleeps until the earliest deadline and is woken only by an earlier
    one: a unit with a short deadline, started while a long one runs, is still cut on
    time, and the long one is left alone."""
    watchdog = Watchdog("test-deadlines")
    with (psycopg.connect(dsn, autocommit=True) as slow,
          psycopg.connect(dsn, autocommit=True) as stuck):
        with watchdog.guard(slow, 60) as long_guard:
            with watchdog.guard(slow, 120):  # later still: no wake-up needed
                pass
            started = time.monotonic()
            with pytest.raises(psycopg.OperationalError), watchdog.guard(stuck, 0.5) as guard:
                stuck.execute("SELECT pg_sleep(30)")
            assert guard.cut
            assert time.monotonic() - started < 5
            assert slow.execute("SELECT 1").fetchone() == (1,)
        assert not long_guard.cut


@pytest.mark.parametrize(("make_url", "cause"), [
    (lambda url: f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/x", "refused"),
    (lambda url: with_user(url, "no_such_role", "s3cret"), "no_such_role"),
])
def test_connection_failures_are_typed_quick_and_redacted(server_url: str, make_url: Any,
                                                          cause: str) -> None:
    url = make_url(server_url)
    started = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        Client(url, connect_timeout_s=2)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert cause in message
    assert "s3cret" not in message


def test_a_missing_database_is_named(server_url: str) -> None:
    with pytest.raises(Unavailable, match="no_such_db"):
        Client(with_dbname(server_url, "no_such_db"), connect_timeout_s=2)


def test_a_dsn_that_is_not_postgresql_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unsupported scheme 'mysql'"):
        Client("mysql://root@127.0.0.1/app", connect_timeout_s=2)


def test_an_enqueue_run_twice_writes_one_row(client: Client,
                                             connect: psycopg.Connection[Any]) -> None:
    """The statement a retry after a lost reply sends again: same client-made id."""
    st = client.statements
    values = {"queue": "q", "id": uuid.uuid4(), "payload": psycopg.types.json.Jsonb({}),
              "delay_s": None, "run_at": None, "priority": 0, "max_attempts": 3,
              "notify": False, "group": None, "trace_context": None}
    st.all("enqueue", values)
    st.all("enqueue", values)
    assert connect.execute("SELECT count(*) FROM shardq.tasks").fetchone() == (1,)


def test_task_ids_are_unique_in_the_database(client: Client,
                                             connect: psycopg.Connection[Any]) -> None:
    (task_id,) = client.enqueue_many("q", [{}])
    with pytest.raises(psycopg.errors.UniqueViolation):
        connect.execute("INSERT INTO shardq.tasks (id, queue, payload) VALUES (%s, 'q', '{}')",
                        (task_id,))


def test_a_claim_finds_what_its_lost_attempt_took(client: Client) -> None:
    """A claim's tasks carry its token; a retry collects them instead of orphaning them."""
    client.enqueue_many("q", [{"n": i} for i in range(40)])
    st, token = client.statements, uuid.uuid4()
    claim = st.query("claim", 5)
    for bucket in range(client.bucket_count):
        values = {"queue": "q", "bucket": bucket, "lease_s": 30.0, "token": token,
                  "worker_id": None}
        taken = st.all(claim, values)
        if taken:
            break
    assert taken
    again = st.all("claim_recover", values)
    assert sorted(r[0] for r in again) == sorted(r[0] for r in taken)
    assert st.all("claim_recover", {**values, "token": uuid.uuid4()}) == []


def test_ordered_ids_carry_the_time_and_spread_over_the_buckets() -> None:
    before = time.time_ns() // 1_000_000
    ids = POSTGRESQL.new_ids(4096)
    after = time.time_ns() // 1_000_000
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)
    assert all(before <= i.int >> 80 <= after for i in ids)  # 48 bits of Unix milliseconds
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # a batch's ids ascend, in the order they are handed out
    # The bucket comes from the id's last bytes, which count up: an even spread.
    buckets = Counter(POSTGRESQL.bucket_of(i, 16) for i in ids)
    assert sorted(buckets.values()) == [4096 // 16] * 16
    # Each batch starts at random: two batches of the same moment share no id.
    assert not set(ids) & set(POSTGRESQL.new_ids(4096))


def test_cockroachdb_ids_stay_random() -> None:
    ids = COCKROACHDB.new_ids(100)
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    assert len({i.int >> 80 for i in ids}) > 90  # no shared time prefix


def test_task_ids_made_by_the_client_are_time_ordered(client: Client) -> None:
    task_id = client.enqueue("q", {})
    assert isinstance(task_id, TaskId)
    assert task_id.version == 7
    info = client.get(task_id)
    assert info is not None
    assert info.id == task_id


def test_settling_finds_a_task_however_far_its_lease_moved(
        clocked: Any, clock: shardq.ManualClock) -> None:
    """Settles find rows by id and token, not by the lease's old exec_time: a heartbeat
    whose reply was lost (the row moved, the Task did not) is harmless."""
    c = clocked()
    c.enqueue("q", {})
    [task] = [t for b in range(c.bucket_count) for t in c.claim_bucket("q", b, lease_s=10)]
    stale = shardq.Task(**{**vars(task)})
    c.extend(task, 60)  # the row moved; `stale` still holds the old exec_time
    c.extend(stale, 90)
    c.ack(stale)
    assert c.get(task.id) is None


def test_finish_within_cuts_work_already_under_way(dsn: str) -> None:
    """A shutdown's cutoff applies to statements in flight, not only to new ones."""
    db = Database(dsn, max_size=2, statement_timeout_s=60)
    outcome: list[BaseException] = []

    def slow() -> None:
        try:
            db.run(lambda c: c.execute("SELECT pg_sleep(60)").fetchone())
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=slow)
    worker.start()
    try:
        time.sleep(0.5)  # the statement is on the server now
        started = time.monotonic()
        db.finish_within(0.5)
        worker.join(10)
        assert not worker.is_alive()
        assert time.monotonic() - started < 5
        assert len(outcome) == 1
        assert isinstance(outcome[0], ConnectionLost)
    finally:
        db.close()
