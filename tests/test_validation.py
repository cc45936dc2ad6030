"""Bad input raises before anything is written."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, ConfigError, InvalidTask


def nothing_written(conn: psycopg.Connection[Any]) -> bool:
    return conn.execute("SELECT count(*) FROM shardq.tasks").fetchone() == (0,)


BAD_ENQUEUES: list[tuple[str, dict[str, Any]]] = [
    ("not json", {"payload": {"x": object()}}),
    ("not json (set)", {"payload": {1, 2}}),
    ("nan", {"payload": {"x": math.nan}}),
    ("nul", {"payload": {"x": "a\x00b"}}),
    ("oversize", {"payload": "x" * 2_000_000}),
    ("negative delay", {"delay_s": -1}),
    ("infinite delay", {"delay_s": math.inf}),
    ("bool delay", {"delay_s": True}),
    ("naive run_at", {"run_at": datetime(2030, 1, 1)}),
    ("run_at not a datetime", {"run_at": "2030-01-01"}),
    ("delay and run_at", {"delay_s": 1, "run_at": datetime.now().astimezone()}),
    ("float priority", {"priority": 1.5}),
    ("huge priority", {"priority": 10**12}),
    ("zero max_attempts", {"max_attempts": 0}),
    ("bad queue: empty", {"queue": ""}),
    ("bad queue: space", {"queue": "a b"}),
    ("bad queue: quote", {"queue": "x'; DROP TABLE shardq.tasks; --"}),
    ("bad queue: too long", {"queue": "q" * 129}),
    ("bad queue: not str", {"queue": 7}),
]


@pytest.mark.parametrize(("case", "change"), BAD_ENQUEUES, ids=[c for c, _ in BAD_ENQUEUES])
def test_bad_enqueue(client: Client, connect: psycopg.Connection[Any], case: str,
                     change: dict[str, Any]) -> None:
    args: dict[str, Any] = {"queue": "q", "payload": {"ok": 1}, **change}
    with pytest.raises(InvalidTask):
        client.enqueue(args.pop("queue"), args.pop("payload"), **args)
    batch = dict(args)
    with pytest.raises(InvalidTask):
        client.enqueue_many(change.get("queue", "q"),
                            [{"fine": 1}, change.get("payload", {"ok": 1})], **batch)
    assert nothing_written(connect)


def test_oversize_limit_is_configurable(dsn: str, client: Client,
                                        connect: psycopg.Connection[Any]) -> None:
    with shardq.Client(dsn, max_payload_bytes=10) as small:
        small.enqueue("q", "12345678")  # 10 bytes with its quotes
        with pytest.raises(InvalidTask, match="over the limit of 10"):
            small.enqueue("q", "123456789")


def test_payload_string_is_not_a_batch(client: Client) -> None:
    with pytest.raises(InvalidTask):
        client.enqueue_many("q", "abc")


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"limit": 10_001}, {"limit": 2.5},
                                    {"lease_s": 0}, {"lease_s": -3}])
def test_bad_claims(client: Client, kwargs: dict[str, Any]) -> None:
    with pytest.raises(shardq.ShardqError):
        client.claim("q", **kwargs)


def test_bad_bucket(client: Client) -> None:
    with pytest.raises(ConfigError):
        client.claim_bucket("q", client.bucket_count)


def test_bad_settle_arguments(client: Client, connect: psycopg.Connection[Any]) -> None:
    client.enqueue("q", {})
    [task] = [t for b in range(client.bucket_count) for t in client.claim_bucket("q", b)]
    with pytest.raises(InvalidTask):
        client.nack_many([task], ["a", "b"])
    with pytest.raises(InvalidTask):
        client.nack(task, retry_in_s=-1)
    with pytest.raises(InvalidTask):
        client.extend(task, math.nan)
    with pytest.raises(InvalidTask):
        client.defer(task, delay_s=1, run_at=datetime.now().astimezone() + timedelta(1))
    assert connect.execute("SELECT status FROM shardq.tasks").fetchone() == ("locked",)


@pytest.mark.parametrize("settings", [{"lease_s": 0}, {"max_attempts": 0},
                                      {"backoff_jitter": 1.0}, {"bucket_count": 0},
                                      {"bucket_count": 5000}, {"no_such_setting": 1}])
def test_bad_settings(dsn: str, settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        shardq.Client(dsn, **settings)


def test_bucket_count_must_match_schema(dsn: str) -> None:
    with pytest.raises(ConfigError, match="schema has 16 buckets"):
        shardq.Client(dsn, bucket_count=8)
    with shardq.Client(dsn, bucket_count=16) as same:
        assert same.bucket_count == 16


def test_env_settings(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDQ_DSN", dsn)
    monkeypatch.setenv("SHARDQ_LEASE_S", "12.5")
    with shardq.Client() as c:
        assert c.config.lease_s == 12.5 and c.config.dsn == dsn
    monkeypatch.setenv("SHARDQ_MAX_ATTEMPTS", "many")
    with pytest.raises(ConfigError, match="SHARDQ_MAX_ATTEMPTS"):
        shardq.Client()


@pytest.mark.parametrize("queue", ["", "_a", "-a", "a b", "caf\u00e9", "q" * 129, "a\nb"])
def test_the_database_refuses_bad_queue_names_written_around_the_client(
        connect: psycopg.Connection[Any], queue: str) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="tasks_queue_check"):
        connect.execute("INSERT INTO shardq.tasks (queue, payload) VALUES (%s, '{}')", (queue,))


def test_the_database_takes_every_good_queue_name(connect: psycopg.Connection[Any]) -> None:
    for queue in ["a", "A.b:c-d_9", "9", "q" * 128]:
        connect.execute("INSERT INTO shardq.tasks (queue, payload) VALUES (%s, '{}')", (queue,))
