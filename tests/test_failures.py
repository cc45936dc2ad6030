"""How failures are stored and logged: sanitised and redacted error text, one bad outcome
never dropping another, mis-routed tasks dead at once, repeated warnings rate-limited."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.config import ClientConfig
from shardq.core.lograte import RateLimit
from shardq.core.redaction import redact
from shardq.core.validate import MAX_ERROR_CHARS, error_text
from shardq.worker.completer import Completer, Outcome
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from shardq.worker.metrics import Metrics
from tests.helpers import wait_for


def run_until_settled(dsn: str, client: shardq.Client, app: shardq.App, queue: str,
                      done: Callable[[], bool] | None = None, timeout_s: float = 30) -> None:
    """Run a worker on ``app`` until no task of ``queue`` is available or locked."""
    worker = Worker(app, ClientConfig(dsn=dsn),
                    WorkerConfig(janitors=0, listen=False, ack_flush_ms=50))
    worker.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stats = client.stats(queue)
            if stats["available"] + stats["locked"] == 0 and (done is None or done()):
                return
            time.sleep(0.05)
        pytest.fail(f"tasks of {queue} still waiting or locked: {client.stats(queue)}")
    finally:
        worker.stop(grace_s=5)


def errors_of(connect: psycopg.Connection[Any], queue: str) -> list[tuple[Any, ...]]:
    return connect.execute("SELECT status, attempts, last_error FROM shardq.tasks "
                           "WHERE queue = %s ORDER BY last_error", (queue,)).fetchall()


# -- item 7: error text with NUL or lone surrogates; one bad outcome ----------------------

def test_a_handler_error_with_nul_and_surrogates_is_stored_sanitised(
        dsn: str, client: shardq.Client, connect: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    app = shardq.App(dsn)

    @app.task(queue="dirty", max_attempts=1)
    def dirty(n: int) -> None:
        if n % 3 == 0:
            raise ValueError(f"bad\x00byte \ud800 in {n}")
        if n % 3 == 1:
            raise ValueError(f"plain failure {n}")

    dirty.enqueue_many([(n,) for n in range(30)])
    run_until_settled(dsn, client, app, "dirty")
    rows = errors_of(connect, "dirty")
    assert len(rows) == 20
    assert {(s, a) for s, a, _ in rows} == {("dead", 1)}
    dirty_errors = [e for _, _, e in rows if "byte" in e]
    assert len(dirty_errors) == 10
    assert all("badbyte \ufffd in" in e and "\x00" not in e for e in dirty_errors)
    # The worker's failure lines are writable to a UTF-8 log too.
    logged = [r.getMessage() for r in caplog.records if "badbyte" in r.getMessage()]
    assert logged
    assert all("\ud800" not in line and "\x00" not in line for line in logged)


def claimed(client: shardq.Client, queue: str, n: int) -> list[shardq.Task]:
    client.enqueue_many(queue, [{"n": i} for i in range(n)])
    tasks = [t for b in range(client.bucket_count) for t in client.claim_bucket(queue, b)]
    assert len(tasks) == n
    return sorted(tasks, key=lambda t: t.payload["n"])


def test_one_bad_outcome_does_not_drop_the_others(
        client: shardq.Client, connect: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    first, bad, last, done = claimed(client, "outcomes", 4)
    completer = Completer(client, Metrics(), batch=100, flush_ms=5, release=list)
    completer.add(Outcome(first, ok=False, error="first failed"))
    completer.add(Outcome(bad, ok=False, error="wants nan", retry_in_s=math.nan))  # Retry(nan)
    completer.add(Outcome(last, ok=False, error="last failed"))
    completer.add(Outcome(done, ok=True))
    with caplog.at_level(logging.WARNING, "shardq.worker"):
        assert completer.run_once() == 4
    rows = dict(connect.execute("SELECT payload->>'n', coalesce(last_error, status) "
                                "FROM shardq.tasks").fetchall())
    assert rows == {"0": "first failed", "1": "locked", "2": "last failed"}
    assert any("one by one" in r.message for r in caplog.records)
    assert any(str(bad.id) in r.message and r.levelno == logging.ERROR for r in caplog.records)


class CountedCompleter(Completer):
    """A completer that counts its steps."""

    steps = 0

    def run_once(self) -> int:
        self.steps += 1
        return super().run_once()


def test_an_idle_completer_sleeps_until_an_outcome_comes(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    first, second = claimed(client, "idle-acks", 2)
    completer = CountedCompleter(client, Metrics(), batch=100, flush_ms=5, release=list)
    completer.start()
    try:
        time.sleep(0.5)  # a hundred flush intervals with nothing to write
        assert completer.steps <= 2
        completer.add(Outcome(first, ok=True))  # wakes it: written within the interval
        wait_for(lambda: connect.execute("SELECT count(*) FROM shardq.tasks").fetchone()
                 == (1,), timeout=5, interval=0.005, what="the first ack")
        completer.add(Outcome(second, ok=True))
        wait_for(lambda: connect.execute("SELECT count(*) FROM shardq.tasks").fetchone()
                 == (0,), timeout=5, interval=0.005, what="the second ack")
    finally:
        completer.stop()


@pytest.mark.parametrize("in_s", [math.nan, -1, math.inf, "soon"])
def test_a_bad_retry_delay_fails_the_handler_not_the_batch(in_s: Any) -> None:
    with pytest.raises(shardq.InvalidTask, match="in_s"):
        shardq.Retry(in_s=in_s)


def test_error_text_is_cut_to_its_documented_size_keeping_both_ends() -> None:
    text = "Traceback (most recent call last):\n" + "x" * 10_000 + "\nValueError: the cause"
    stored = error_text(text)
    assert len(stored) <= MAX_ERROR_CHARS
    assert stored.startswith("Traceback")
    assert stored.endswith("ValueError: the cause")
    assert "characters cut" in stored
    assert error_text("a\x00b\udc80c") == "ab\ufffdc"


def test_nack_stores_sanitised_error_text(client: shardq.Client,
                                          connect: psycopg.Connection[Any]) -> None:
    [task] = claimed(client, "nacked", 1)
    client.nack(task, "nul\x00 and \ud800 " + "y" * 9000)
    [(error,)] = connect.execute("SELECT last_error FROM shardq.tasks").fetchall()
    assert error.startswith("nul and \ufffd y")
    assert len(error) <= MAX_ERROR_CHARS


# -- item 10: a task with no handler in the app ---------------------------------------------

def test_a_task_without_a_handler_is_dead_at_once_and_logged_rarely(
        dsn: str, client: shardq.Client, connect: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    app = shardq.App(dsn)

    @app.task(queue="routed")
    def known() -> None:
        pass

    client.enqueue_many("routed", [{"raw": n} for n in range(150)])
    client.enqueue_many("routed", [{"task": "nope", "args": [], "kwargs": {}}] * 150)
    known.enqueue()
    with caplog.at_level(logging.WARNING, "shardq.worker"):
        run_until_settled(dsn, client, app, "routed")
    rows = errors_of(connect, "routed")
    assert len(rows) == 300
    assert {(s, a) for s, a, _ in rows} == {("dead", 1)}
    assert {e for _, _, e in rows} == {
        "no handler for task 'nope' on queue 'routed' in this app",
        "no handler for a task without a name (a raw payload) on queue 'routed' in this app"}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert 1 <= len(warnings) <= 2, [r.getMessage() for r in warnings]


def test_rate_limit_lets_one_line_per_key_through_and_counts_the_rest() -> None:
    now = [0.0]
    limit = RateLimit(10, clock=lambda: now[0])
    assert limit.allow(("q", "E")) == 0
    assert limit.allow(("q", "E")) is None
    assert limit.allow(("q", "F")) == 0  # another error type has its own line
    assert limit.allow(("q", "E")) is None
    now[0] = 10.0
    assert limit.allow(("q", "E")) == 2
    assert limit.allow(("q", "E")) is None


# -- item 11: secrets in stored errors -------------------------------------------------------

@pytest.mark.parametrize(("text", "masked"), [
    ("postgresql://app:s3cret@db:5432/x", "postgresql://app:***@db:5432/x"),
    ("postgresql://user:p@ss@host/db", "postgresql://user:***@host/db"),
    ("host=db password='a b c' user=app", "host=db password=*** user=app"),
    ("host=db password='it\\'s' user=app", "host=db password=*** user=app"),
    ("host=db password=hunter2 user=app", "host=db password=*** user=app"),
    ("postgresql://app@db/x?sslmode=require&password=hunter2&x=1",
     "postgresql://app@db/x?sslmode=require&password=***&x=1"),
    ("to 'cockroachdb://root:s3cret@db:26257/x' sslpassword=zz9",
     "to 'cockroachdb://root:***@db:26257/x' sslpassword=***"),
    ("postgresql://app@db/x and password authentication failed",
     "postgresql://app@db/x and password authentication failed"),
])
def test_redact_masks_every_password(text: str, masked: str) -> None:
    assert redact(text) == masked


def test_stored_errors_have_passwords_masked(dsn: str, client: shardq.Client,
                                             connect: psycopg.Connection[Any]) -> None:
    app = shardq.App(dsn)

    @app.task(queue="secrets", max_attempts=1)
    def leak() -> None:
        raise ConnectionError("cannot reach postgresql://app:s3cret@db/x (password='a b c')")

    leak.enqueue()
    run_until_settled(dsn, client, app, "secrets")
    [task] = claimed(client, "secrets2", 1)
    client.nack(task, "postgresql://user:p@ss@host/db")
    errors = " ".join(e for (e,) in connect.execute("SELECT last_error FROM shardq.tasks"))
    assert "postgresql://app:***@db/x" in errors
    assert "user:***@host" in errors
    assert "s3cret" not in errors
    assert "a b c" not in errors
    assert "p@ss" not in errors
