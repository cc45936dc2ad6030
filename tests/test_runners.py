"""The two runners' error boundary under real faults, each test run on both: the blocking
Database and the asyncio AsyncDatabase raise, redact, retry and replace connections
alike."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
import pytest

from shardq.core.adb import AsyncDatabase
from shardq.core.boundary import DeadlineExceeded
from shardq.core.db import Database
from shardq.core.errors import ConnectionLost, DatabaseError, InvalidTask, Unavailable
from shardq.core.plan import Fetch, Plan, Steps, plan, single
from tests.helpers import free_port, wait_for, with_user

T = TypeVar("T")
PASSWORD = "s3cret-Pw"


class Runner:
    """One of the two runners behind a blocking face: the Database as it is, the
    AsyncDatabase on an event loop of its own (each call runs on it to its end)."""

    def __init__(self, kind: str, dsn: str, **settings: Any) -> None:
        self.loop: asyncio.Runner | None = None
        if kind == "Database":
            self.db: Database | AsyncDatabase = Database(dsn, max_size=2, **settings)
            return
        self.loop = asyncio.Runner()
        self.db = AsyncDatabase(dsn, max_size=2, **settings)
        try:
            self.loop.run(self.db.open())
        except BaseException:
            self.loop.close()
            raise

    def perform(self, work: Plan[T]) -> T:
        """Run ``work`` with the runner's retries and errors."""
        if isinstance(self.db, Database):
            return self.db.perform(work)
        assert self.loop is not None
        return self.loop.run(self.db.perform(work))

    def fill_pool(self) -> None:
        """Have both of the pool's connections open and idle (both taken, then given back)."""
        if isinstance(self.db, Database):
            with self.db.pool.connection(), self.db.pool.connection():
                return
        assert self.loop is not None
        self.loop.run(_fill(self.db))

    def close(self) -> None:
        """Close the pool (and the loop)."""
        if isinstance(self.db, Database):
            self.db.close()
            return
        assert self.loop is not None
        self.loop.run(self.db.close())
        self.loop.close()


async def _fill(db: AsyncDatabase) -> None:
    assert db.pool is not None
    async with db.pool.connection(), db.pool.connection():
        pass


@pytest.fixture(params=["Database", "AsyncDatabase"])
def opened(request: pytest.FixtureRequest, dsn: str) -> Iterator[Callable[..., Runner]]:
    """Opens runners of one kind (each test runs with either), on the shared database
    unless given another URL; they are closed at the end."""
    runners: list[Runner] = []

    def open_runner(url: str = dsn, **settings: Any) -> Runner:
        runners.append(Runner(str(request.param), url, **settings))
        return runners[-1]

    yield open_runner
    for runner in runners:
        runner.close()


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception behind it (its cause, or the one it was raised while
    handling), each once."""
    found: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if not any(current is seen for seen in found):
            found.append(current)
            todo += [e for e in (current.__cause__, current.__context__) if e is not None]
    return found


def ended_midway(admin: psycopg.Connection[Any], attempts: list[int]) -> Callable[[], Steps[int]]:
    """Steps of two statements whose first attempt has its backend ended between them,
    from ``admin``; each attempt's backend pid goes to ``attempts``."""
    def steps() -> Steps[int]:
        [(pid,)] = yield Fetch("SELECT pg_backend_pid()")
        attempts.append(pid)
        if len(attempts) == 1:  # returns once the backend is gone
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        [(one,)] = yield Fetch("SELECT 1")
        return int(one)

    return steps


def test_a_failure_is_never_its_own_cause_and_keeps_the_drivers_error(
        opened: Callable[..., Runner], connect: psycopg.Connection[Any]) -> None:
    runner = opened()
    with pytest.raises(DatabaseError) as refused:
        runner.perform(single(Fetch("SELECT 1/0")))
    assert isinstance(refused.value.__cause__, psycopg.errors.DivisionByZero)

    def rejecting() -> Steps[None]:  # an operation that turns the driver's error into its own
        try:
            yield Fetch("SELECT 1/0")
        except psycopg.errors.DivisionByZero as exc:
            raise InvalidTask("the server refused the value") from exc

    with pytest.raises(InvalidTask) as own:
        runner.perform(plan(rejecting))
    assert isinstance(own.value.__cause__, psycopg.errors.DivisionByZero)

    with pytest.raises(ConnectionLost) as lost:
        runner.perform(plan(ended_midway(connect, []), idempotent=False))
    assert isinstance(lost.value.__cause__, psycopg.OperationalError)

    for caught in (refused, own, lost):
        assert [e for e in chain(caught.value) if e.__cause__ is e] == []


def test_no_message_of_a_failure_quotes_the_password(
        opened: Callable[..., Runner], dsn: str, connect: psycopg.Connection[Any]) -> None:
    with pytest.raises(Unavailable) as unreachable:
        opened(f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/x",
               connect_timeout_s=2)
    assert "cannot connect to postgresql://postgres:***@127.0.0.1" in str(unreachable.value)
    assert isinstance(unreachable.value.__cause__, psycopg.OperationalError)
    # The test server trusts its clients: the password is ignored, but is in the DSN.
    runner = opened(with_user(dsn, "postgres", PASSWORD))
    with pytest.raises(DatabaseError) as refused:
        runner.perform(single(Fetch("SELECT 1/0")))
    with pytest.raises(ConnectionLost) as lost:
        runner.perform(plan(ended_midway(connect, []), idempotent=False))
    for caught in (unreachable, refused, lost):
        assert [str(e) for e in chain(caught.value) if PASSWORD in str(e)] == []


def test_a_lost_connection_is_retried_on_a_drained_pool(
        opened: Callable[..., Runner], dsn: str, connect: psycopg.Connection[Any]) -> None:
    name = f"shardq_runners_{uuid.uuid4().hex[:12]}"
    runner = opened(f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}")
    runner.fill_pool()

    def backends() -> set[int]:
        rows = connect.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                               [name]).fetchall()
        return {int(r[0]) for r in rows}

    wait_for(lambda: len(backends()) == 2, timeout=10, what="the pool's two connections")
    before = backends()
    attempts: list[int] = []
    assert runner.perform(plan(ended_midway(connect, attempts))) == 1
    assert len(attempts) == 2
    assert attempts[0] in before
    # Drained: the retry found the other idle connection closed, and ran on a new one.
    assert attempts[1] not in before
    wait_for(lambda: not backends() & before, timeout=10, what="the idle backend to end")


def test_work_past_its_deadline_is_cut_logged_and_reported_alike(
        opened: Callable[..., Runner], caplog: pytest.LogCaptureFixture) -> None:
    runner = opened(statement_timeout_s=0.3)
    with (caplog.at_level(logging.WARNING, logger="shardq"),
          pytest.raises(ConnectionLost, match=r"overran its deadline of 0\.3s") as caught):
        runner.perform(plan(_sleeping, idempotent=False))
    assert isinstance(caught.value.__cause__, DeadlineExceeded)
    assert "a statement overran its deadline of 0.3s" in caplog.text
    assert runner.perform(single(Fetch("SELECT 7"))) == [(7,)]  # on a connection not cut


def _sleeping() -> Steps[None]:
    yield Fetch("SELECT pg_sleep(30)")
