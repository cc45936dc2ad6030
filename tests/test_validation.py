"""Bad input raises before anything is written."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, ClientConfig, ConfigError, InvalidTask
from shardq.core.config import load
from shardq.worker.config import WorkerConfig
from tests.helpers import claim_all

pytestmark = pytest.mark.both_clients


def nothing_written(conn: psycopg.Connection[Any]) -> bool:
    return conn.execute("SELECT count(*) FROM shardq.tasks").fetchone() == (0,)


def _circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def _nested(depth: int) -> list[Any]:
    inner: list[Any] = []
    for _ in range(depth):
        inner = [inner]
    return inner


BAD_ENQUEUES: list[tuple[str, dict[str, Any]]] = [
    ("not json", {"payload": {"x": object()}}),
    ("circular", {"payload": {"x": _circular()}}),
    ("nested too deeply", {"payload": _nested(5000)}),
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
    ("priority over int4", {"priority": 3_000_000_000}),
    ("priority under int4", {"priority": -3_000_000_000}),
    ("zero max_attempts", {"max_attempts": 0}),
    ("max_attempts over int4", {"max_attempts": 2**31}),
    ("lone surrogate", {"payload": {"x": "a\ud800b"}}),
    ("lone surrogate in a name", {"payload": {"\udc00": 1}}),
    ("surrogate halves apart", {"payload": ["\ud83d", "\ude00"]}),
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


def test_a_bad_payload_late_in_a_batch_writes_none_of_it(
        client: Client, connect: psycopg.Connection[Any]) -> None:
    """A batch over COPY_ROWS takes several COPY statements, and each statement's
    payloads are encoded while the server writes the previous one's rows: a payload
    that fails after earlier statements were sent rolls the whole batch back, and the
    pool stays usable."""
    for size in (650, 1_234):  # the bad one in the second / the third statement
        with pytest.raises(InvalidTask, match="not JSON-serialisable"):
            client.enqueue_many("q", [{"n": n} for n in range(size)] + [{"bad": object()}])
        assert nothing_written(connect)
    # The failing encoding ran while a COPY's reply was due: the reply was still read,
    # so no connection went back to the pool in the middle of a statement.
    assert client.db.pool.get_stats().get("returns_bad", 0) == 0
    ids = client.enqueue_many("q", [{"n": n} for n in range(1_234)])
    rows = connect.execute("SELECT id, payload FROM shardq.tasks").fetchall()
    assert sorted(rows) == sorted(zip(ids, [{"n": n} for n in range(1_234)], strict=True))


def test_oversize_limit_is_configurable(dsn: str, client: Client,
                                        connect: psycopg.Connection[Any]) -> None:
    with shardq.Client(dsn, max_payload_bytes=10) as small:
        small.enqueue("q", "12345678")  # 10 bytes with its quotes
        with pytest.raises(InvalidTask, match="over the limit of 10"):
            small.enqueue("q", "123456789")


def test_unicode_that_looks_odd_but_is_valid_is_kept(client: Client) -> None:
    payload = {"emoji": "\U0001f600", "escaped": "\\u0000 and \\ud800", "pair": "\ud83d\ude00"}
    task_id = client.enqueue("q", payload)
    info = client.get(task_id)
    assert info is not None
    assert info.payload == {**payload, "pair": "\U0001f600"}


@pytest.mark.parametrize("key", ["a\x00b", "a\ud800", "\udfff"])
def test_keys_that_cannot_be_stored_are_refused(client: Client,
                                                connect: psycopg.Connection[Any],
                                                key: str) -> None:
    with pytest.raises(InvalidTask, match="key"):
        client.enqueue("q", {}, key=key)
    with pytest.raises(InvalidTask, match="key"):
        client.enqueue_many("q", [{}, {}], keys=["fine", key])
    assert nothing_written(connect)


def test_payload_string_is_not_a_batch(client: Client) -> None:
    with pytest.raises(InvalidTask):
        client.enqueue_many("q", "abc")


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"limit": 10_001}, {"limit": 2.5},
                                    {"lease_s": 0}, {"lease_s": -3}, {"lease_s": math.nan},
                                    {"lease_s": 1e12}])
def test_bad_claims_are_invalid_arguments(client: Client, kwargs: dict[str, Any]) -> None:
    client.enqueue("q", {})
    with pytest.raises(InvalidTask) as caught:
        client.claim("q", **kwargs)
    assert caught.type is InvalidTask  # not ConfigError, its sibling
    with pytest.raises(InvalidTask) as caught:
        client.claim_bucket("q", 0, **kwargs)
    assert caught.type is InvalidTask


@pytest.mark.parametrize("bucket", [16, -1, 1.0, True])
def test_bad_bucket(client: Client, bucket: Any) -> None:
    with pytest.raises(InvalidTask):
        client.claim_bucket("q", bucket)


@pytest.mark.parametrize(("buckets", "says"), [([], "at least one"), ([3, 3], "each bucket once"),
                                               ([0, 16], r"\[0, 16\)"), ("01", "a list"),
                                               ([True], "integer")])
def test_bad_bucket_lists(client: Client, buckets: Any, says: str) -> None:
    with pytest.raises(InvalidTask, match=says):
        client.claim_buckets("q", buckets)


@pytest.mark.parametrize(("call", "args"), [
    ("ack", (None,)), ("ack_many", (None,)), ("ack_many", ("abc",)), ("nack", (None, "x")),
    ("extend", ({"id": 1}, 10)), ("release", (None,)), ("defer", (None,)),
    ("get", ("not-a-uuid",)), ("get", (123,)),
])
def test_bad_arguments_are_invalid_task(client: Client, call: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(InvalidTask):
        getattr(client, call)(*args)


@pytest.mark.parametrize("ids", [["x"], [123], "3f0c"])
def test_retry_dead_refuses_what_is_not_an_id(client: Client, ids: Any) -> None:
    with pytest.raises(InvalidTask):
        client.retry_dead(ids)


@pytest.mark.parametrize("interval_s", [0, -1, math.nan, math.inf, 1e12])
def test_bad_janitor_interval(client: Client, interval_s: float) -> None:
    with pytest.raises(InvalidTask):
        client.janitor(interval_s)


def test_bad_settle_arguments(client: Client, connect: psycopg.Connection[Any]) -> None:
    client.enqueue("q", {})
    [task] = claim_all(client, "q")
    with pytest.raises(InvalidTask):
        client.nack_many([task], ["a", "b"])
    with pytest.raises(InvalidTask):
        client.nack(task, retry_in_s=-1)
    with pytest.raises(InvalidTask):
        client.extend(task, math.nan)
    with pytest.raises(InvalidTask):
        client.defer(task, delay_s=1, run_at=datetime.now().astimezone() + timedelta(1))
    for error in (123, b"bytes", ValueError("not text")):
        with pytest.raises(InvalidTask, match="error must be a string"):
            client.nack(task, error)  # type: ignore[arg-type]
    assert connect.execute("SELECT status FROM shardq.tasks").fetchone() == ("locked",)


BAD_SETTINGS: list[dict[str, Any]] = [
    {"lease_s": 0}, {"max_attempts": 0}, {"backoff_jitter": 1.0}, {"bucket_count": 0},
    {"bucket_count": 5000}, {"no_such_setting": 1},
    {"lease_s": math.nan}, {"lease_s": math.inf}, {"lease_s": 1e12}, {"lease_s": -1},
    {"backoff_base_s": math.nan}, {"backoff_base_s": 0}, {"backoff_cap_s": math.inf},
    {"backoff_cap_s": 1e300}, {"backoff_base_s": 10, "backoff_cap_s": 5},
    {"backoff_jitter": math.nan}, {"janitor_interval_s": 0}, {"janitor_interval_s": -1},
    {"janitor_interval_s": math.nan}, {"max_attempts": 2**31}, {"max_attempts": 2.5},
    {"max_attempts": True}, {"pool_max_size": 10**6}, {"max_payload_bytes": 2**40},
    {"dead_retention_s": math.nan}, {"dead_retention_s": 0}, {"notify": "yes"},
    {"dsn": 123},
]


@pytest.mark.parametrize("settings", BAD_SETTINGS)
def test_bad_settings(dsn: str, settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as raised:
        shardq.Client(**{"dsn": dsn, **settings})
    assert "\n" not in str(raised.value)


def test_client_with_a_dsn_that_is_not_text() -> None:
    with pytest.raises(ConfigError, match="dsn"):
        shardq.Client(123)  # type: ignore[arg-type]


@pytest.mark.parametrize("settings", [
    {"metrics_port": 99999}, {"metrics_port": -1}, {"concurrency": 0}, {"batch": 10**6},
    {"shutdown_grace_s": math.nan}, {"poll_max_ms": 0}, {"ack_flush_ms": 10**9},
    {"claimers": 1.5}, {"listen": "no"}, {"queue": ("ok", "a b")},
    {"metrics_port": 65535, "processes": 2},
])
def test_bad_worker_settings(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        WorkerConfig(**settings)


@pytest.mark.parametrize(("name", "raw"), [
    ("SHARDQ_LEASE_S", "nan"), ("SHARDQ_LEASE_S", "inf"), ("SHARDQ_LEASE_S", "1e12"),
    ("SHARDQ_BACKOFF_BASE_S", "-1"), ("SHARDQ_BACKOFF_CAP_S", "nan"),
    ("SHARDQ_JANITOR_INTERVAL_S", "0"), ("SHARDQ_MAX_ATTEMPTS", "2147483648"),
    ("SHARDQ_NOTIFY", "maybe"), ("SHARDQ_NOTIFY", "enabled"),
])
def test_bad_env_settings(dsn: str, monkeypatch: pytest.MonkeyPatch, name: str,
                          raw: str) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigError, match=name if name == "SHARDQ_NOTIFY" else "must be"):
        shardq.Client(dsn)


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("True", True), ("on", True),
                                            ("yes", True), ("0", False), ("off", False),
                                            ("FALSE", False), ("no", False)])
def test_boolean_env_spellings(monkeypatch: pytest.MonkeyPatch, raw: str, value: bool) -> None:
    monkeypatch.setenv("SHARDQ_NOTIFY", raw)
    assert load(ClientConfig).notify is value


def test_task_lease_is_a_setting(dsn: str) -> None:
    app = shardq.App(dsn)
    for lease_s in (0, math.nan, 1e12):
        with pytest.raises(ConfigError, match="lease_s"):
            app.task(queue="q", lease_s=lease_s)(lambda: None)
        with pytest.raises(ConfigError, match="lease_s"):
            app.handler("q", lease_s=lease_s)(lambda payload: None)


BAD_TASK_OPTIONS: list[dict[str, Any]] = [
    {"max_attempts": 0}, {"max_attempts": 2**31}, {"max_attempts": "3"},
    {"priority": 1.5}, {"priority": 3_000_000_000}, {"queue": "a b"}, {"queue": ""},
]


@pytest.mark.parametrize("option", BAD_TASK_OPTIONS, ids=str)
def test_task_options_are_refused_when_decorated_as_enqueue_refuses_them(
        client: Client, connect: psycopg.Connection[Any], option: dict[str, Any]) -> None:
    """``@app.task`` and ``@app.periodic`` refuse an option enqueue would refuse, in the
    words enqueue uses, naming the task, instead of every enqueue (or slot) failing."""
    given = {"queue": "q", **option}
    with pytest.raises(InvalidTask) as at_enqueue:
        client.enqueue(given.pop("queue"), {"n": 1}, **given)
    app = shardq.App(client.config.dsn)
    for decorate, label in ((app.task(name="t", **option), "task 't'"),
                            (app.periodic(every_s=60, name="p", **option),
                             "periodic schedule 'p'")):
        with pytest.raises(ConfigError) as at_decoration:
            decorate(lambda: None)
        assert str(at_decoration.value) == f"{label}: {at_enqueue.value}"
    if "queue" in option:
        with pytest.raises(ConfigError) as at_decoration:
            app.handler(option["queue"])(lambda payload: None)
        assert str(at_decoration.value) == f"handler of queue {option['queue']!r}: " \
                                           f"{at_enqueue.value}"
    assert (app.tasks, app.schedules, app.raw) == ({}, {}, {})
    assert nothing_written(connect)


def test_a_task_name_the_database_cannot_store_is_refused_when_decorated() -> None:
    app = shardq.App()
    for decorate in (app.task(name="a\x00b"), app.periodic(every_s=60, name="a\x00b")):
        with pytest.raises(ConfigError, match="a task's name contains a NUL character"):
            decorate(lambda: None)
    assert (app.tasks, app.schedules) == ({}, {})


def test_bucket_count_must_match_schema(dsn: str) -> None:
    with pytest.raises(ConfigError, match="schema has 16 buckets"):
        shardq.Client(dsn, bucket_count=8)
    with shardq.Client(dsn, bucket_count=16) as same:
        assert same.bucket_count == 16


def test_env_settings(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDQ_DSN", dsn)
    monkeypatch.setenv("SHARDQ_LEASE_S", "12.5")
    with shardq.Client() as c:
        assert c.config.lease_s == 12.5
        assert c.config.dsn == dsn
    monkeypatch.setenv("SHARDQ_MAX_ATTEMPTS", "many")
    with pytest.raises(ConfigError, match="SHARDQ_MAX_ATTEMPTS"):
        shardq.Client()


@pytest.mark.parametrize("queue", ["", "_a", "-a", "a b", "caf\u00e9", "\u00e9", "q" * 129, "a\nb",
                                   "a\u00ad", "\uff41", "q" * 127 + "\u00e9", "a/b"])
def test_the_database_refuses_bad_queue_names_written_around_the_client(
        connect: psycopg.Connection[Any], queue: str) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="tasks_queue_check"):
        connect.execute("INSERT INTO shardq.tasks (queue, payload) VALUES (%s, '{}')", (queue,))


GOOD_QUEUES = ["a", "A.b:c-d_9", "9", "q" * 128]


def test_the_database_takes_every_good_queue_name(client: shardq.Client,
                                                  connect: psycopg.Connection[Any]) -> None:
    """The table's rule and the client's agree on the good names: written around the
    client, each is stored, and the client claims it by its name."""
    for queue in GOOD_QUEUES:
        connect.execute("INSERT INTO shardq.tasks (queue, payload) VALUES (%s, '{}')", (queue,))
    stored = [q for (q,) in connect.execute("SELECT queue FROM shardq.tasks")]
    assert sorted(stored) == sorted(GOOD_QUEUES)
    for queue in GOOD_QUEUES:
        assert [t.queue for t in claim_all(client, queue)] == [queue]


def test_per_task_options_must_be_lists(client: shardq.Client) -> None:
    client.enqueue("lists", {})
    tasks = client.claim("lists", limit=1) or claim_all(client, "lists")
    with pytest.raises(shardq.InvalidTask, match="dead must be a list with one entry per task"):
        client.nack_many(tasks, dead=True)  # type: ignore[arg-type]
