"""The control, dead-letter, inspection, figure and janitor plans run on the asyncio runner.

Each operation is one plan that both runners drive; these tests run them through
:class:`shardq.core.adb.AsyncDatabase` and check the rows they leave and read, and that
the blocking runner reads the same figures from the same plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar
from uuid import UUID, uuid4

import pytest

from shardq.core.adb import AsyncDatabase
from shardq.core.clock import ManualClock
from shardq.core.config import ClientConfig
from shardq.core.db import Database
from shardq.core.errors import InvalidTask, UnknownQueue
from shardq.core.statements import Statements
from shardq.ops import attempts, control, deadletters, history, inspection, queuestats, workers
from tests.conftest import Databases
from tests.helpers import query, scalar

pytestmark = pytest.mark.server

T = TypeVar("T")


def on_asyncio(url: str, work: Callable[[AsyncDatabase, Statements], Awaitable[T]]) -> T:
    """``work`` with an open AsyncDatabase of ``url`` and its statements, in a new event
    loop."""
    async def main() -> T:
        adb = AsyncDatabase(url, max_size=2)
        await adb.open()
        try:
            return await work(adb, Statements(adb, ClientConfig()))
        finally:
            await adb.close()

    return asyncio.run(main())


def insert(url: str, queue: str, count: int, *, status: str = "available",
           error: str | None = None) -> list[UUID]:
    """Add ``count`` tasks to ``queue`` directly; their ids, oldest first."""
    rows = query(url, "INSERT INTO shardq.tasks (queue, payload, status, last_error, exec_time) "
                      "SELECT %s, jsonb_build_object('n', g), %s, %s, "
                      "now() - interval '1 minute' + g * interval '1 ms' "
                      "FROM generate_series(1, %s) AS g RETURNING id, payload",
                 (queue, status, error, count))
    return [row[0] for row in sorted(rows, key=lambda r: r[1]["n"])]


def test_queue_control_on_asyncio(databases: Databases) -> None:
    url = databases.create()
    insert(url, "mail", 3)

    async def work(adb: AsyncDatabase, st: Statements) -> tuple[Any, ...]:
        at = await adb.perform(control.pause(st, "mail"))
        again = await adb.perform(control.pause(st, "mail"))
        listed = await adb.perform(control.paused(st))
        with pytest.raises(UnknownQueue) as refused:  # known and names, composed in the plan
            await adb.perform(control.pause(st, "mial"))
        resumed = await adb.perform(control.resume(st, "mail"))
        twice = await adb.perform(control.resume(st, "mail"))
        early = await adb.perform(control.pause(st, "later", create=True))
        return at, again, listed, refused.value, resumed, twice, early

    at, again, listed, refused, resumed, twice, early = on_asyncio(url, work)
    assert isinstance(at, datetime)
    assert again == at  # a second pause keeps the first one's time
    assert listed == {"mail": at}
    assert refused.known == ["mail"]
    assert (resumed, twice) == (True, False)
    assert query(url, "SELECT name, paused_at FROM shardq.queues") == [("later", early)]


def test_cancel_and_purge_on_asyncio(databases: Databases) -> None:
    url = databases.create()
    first, *rest = insert(url, "mail", 5)
    query(url, "UPDATE shardq.tasks SET status = 'locked', lease_token = gen_random_uuid() "
               "WHERE id = %s RETURNING id", (rest[0],))

    async def work(adb: AsyncDatabase, st: Statements) -> tuple[Any, ...]:
        waiting = await adb.perform(control.cancel(st, first))
        running = await adb.perform(control.cancel(st, rest[0]))
        gone = await adb.perform(control.cancel(st, first))
        bounded = await adb.perform(control.purge(st, "mail", 2))
        rest_purged = await adb.perform(control.purge(st, "mail"))
        return waiting, running, gone, bounded, rest_purged

    waiting, running, gone, bounded, rest_purged = on_asyncio(url, work)
    assert (waiting.task_id, waiting.status, waiting.was_running) == (first, "available", False)
    assert (running.status, running.was_running) == ("locked", True)
    assert gone.status is None
    assert (bounded, rest_purged) == (2, 1)
    assert scalar(url, "SELECT count(*) FROM shardq.tasks") == 0


def test_reads_and_dead_letters_on_asyncio(databases: Databases) -> None:
    url = databases.create()
    [waiting] = insert(url, "mail", 1)
    dead = insert(url, "mail", 3, status="dead", error="boom")

    async def work(adb: AsyncDatabase, st: Statements) -> tuple[Any, ...]:
        task = await adb.perform(inspection.get(st, waiting))
        missing = await adb.perform(inspection.get(st, UUID(int=7)))
        listed = await adb.perform(deadletters.listing(st, "mail", 2))
        retried = await adb.perform(deadletters.retry(st, [dead[0]], None))
        purged = await adb.perform(deadletters.purge(st, "mail", 0))
        return task, missing, listed, retried, purged

    task, missing, listed, retried, purged = on_asyncio(url, work)
    assert (task.id, task.queue, task.state, task.payload) == (waiting, "mail", "available",
                                                               {"n": 1})
    assert missing is None
    assert [t.id for t in listed] == [dead[2], dead[1]]  # the newest first
    assert {t.last_error for t in listed} == {"boom"}
    assert retried == [dead[0]]
    assert purged == 2
    assert sorted(query(url, "SELECT id, status FROM shardq.tasks")) == sorted(
        [(waiting, "available"), (dead[0], "available")])


def test_figures_on_both_runners(databases: Databases) -> None:
    url = databases.create()
    insert(url, "mail", 4)
    insert(url, "sms", 2, status="dead")
    query(url, "INSERT INTO shardq.queues (name, paused_at) VALUES ('sms', now()) RETURNING name")

    async def work(adb: AsyncDatabase, st: Statements) -> tuple[Any, ...]:
        one = await adb.perform(queuestats.stats(st, "mail", 60))
        as_dict = await adb.perform(queuestats.stats_dict(st, "sms"))
        every = await adb.perform(queuestats.queues_dict(st))
        return one, as_dict, every

    one, as_dict, every = on_asyncio(url, work)
    assert (one.queue, one.available, one.dead, one.paused, one.slo_s) == ("mail", 4, 0,
                                                                            False, 60.0)
    assert (as_dict["dead"], as_dict["paused"], "slo_s" in as_dict) == (2, True, False)
    assert sorted(every) == ["mail", "sms"]
    config = ClientConfig()
    db = Database.for_config(url, config, max_size=1)
    try:
        blocking = Statements(db, config).perform(queuestats.queues_dict(Statements(db, config)))
    finally:
        db.close()
    counts = ("available", "scheduled", "locked", "dead", "paused", "exact")
    assert {q: [f[c] for c in counts] for q, f in blocking.items()} == \
        {q: [f[c] for c in counts] for q, f in every.items()}


def test_arguments_are_checked_when_the_plan_is_made(databases: Databases) -> None:
    """A bad argument raises at once: the database is never reached (nor even opened)."""
    st = Statements(AsyncDatabase(databases.server_url, max_size=1), ClientConfig())
    with pytest.raises(InvalidTask):
        control.pause(st, "no spaces")
    with pytest.raises(InvalidTask):
        control.cancel(st, "not-an-id")
    with pytest.raises(InvalidTask):
        deadletters.listing(st, "mail", 0)
    with pytest.raises(InvalidTask):
        queuestats.queues(st, slo_s=-1)


def test_janitor_housekeeping_on_asyncio(databases: Databases) -> None:
    """The janitor's fold, purge and prune are plans the asyncio runner drives too; the
    hour's series reads what the fold left."""
    url = databases.create()
    clock = ManualClock(datetime.now(UTC))
    query(url, "INSERT INTO shardq.throughput (queue, period, slot, enqueued, completed) "
               "VALUES ('mail', date_trunc('minute', now()) - interval '10 min', 0, 7, 3), "
               "('mail', date_trunc('minute', now()) - interval '10 min' + interval '1 s', "
               "1, 2, 1) RETURNING 1")
    query(url, "INSERT INTO shardq.attempts (task_id, slot, attempt, queue, ended_at, outcome) "
               "SELECT gen_random_uuid(), 0, 1, 'mail', now() - g * interval '400 days', "
               "'failed' FROM generate_series(1, 3) AS g RETURNING 1")

    async def work(adb: AsyncDatabase, st: Statements) -> tuple[Any, ...]:
        await adb.perform(workers.register(st, uuid4(), "gone", "host", 1, ["mail"]))
        clock.advance(st.config.worker_stale_s + 1)
        folded = await adb.perform(history.fold(st))
        again = await adb.perform(history.fold(st))
        minutes = await adb.perform(history.series(st, "mail", 15))
        purged = await adb.perform(attempts.purge(st))
        pruned = await adb.perform(workers.prune(st))
        return folded, again, minutes, purged, pruned

    async def timed(adb: AsyncDatabase, st: Statements) -> tuple[Any, ...]:
        return await work(adb, Statements(adb, st.config, clock))

    folded, again, minutes, purged, pruned = on_asyncio(url, timed)
    assert (folded, again) == (1, 0)  # both seconds, one minute; a second fold finds none
    assert sum(m.enqueued for m in minutes) == 9
    assert sum(m.completed for m in minutes) == 4
    assert (purged, pruned) == (3, 1)
    assert query(url, "SELECT count(*) FROM shardq.attempts") == [(0,)]
