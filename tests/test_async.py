"""What only the AsyncClient has: an asyncio caller's connection, awaited task functions,
an event loop left free while statements run, and opening and closing.  Every other
call is tested on both clients (the modules marked ``both_clients``)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import psycopg
import pytest

import shardq
from shardq.api import Operations
from shardq.core.plan import Fetch, single
from tests.clients import SHARED

pytestmark = pytest.mark.behaviour


def rows(dsn: str, queue: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT payload FROM shardq.tasks WHERE queue = %s ORDER BY "
                            "payload->>'n'", (queue,)).fetchall()


def test_the_tests_blocking_face_sends_every_call_to_the_asyncclient() -> None:
    """The ``both_clients`` tests reach the AsyncClient for every call the API declares
    (inherited from each group of calls), not the blocking Client beside it."""
    calls = {name for name in dir(Operations) if not name.startswith("_")}
    assert calls - {"bucket_count", "dialect"} == SHARED
    assert {"enqueue", "claim", "ack", "set_limits", "stats", "pause"} <= SHARED


def test_a_task_joins_the_callers_async_transaction(client: shardq.Client, dsn: str) -> None:
    async def scenario() -> None:
        async with (shardq.AsyncClient(dsn) as aclient,
                    await psycopg.AsyncConnection.connect(dsn) as conn):
            async with conn.transaction():
                await aclient.enqueue("atx", {"n": 1}, conn=conn)
                await aclient.enqueue_many("atx", [{"n": 2}, {"n": 3}], conn=conn)
                assert rows(dsn, "atx") == []  # not committed yet: invisible
                raise psycopg.Rollback()
            async with conn.transaction():
                await aclient.enqueue("atx", {"n": 4}, conn=conn)
                await aclient.enqueue_many("atx", [{"n": 5}], conn=conn)

    asyncio.run(scenario())
    assert rows(dsn, "atx") == [({"n": 4},), ({"n": 5},)]


def test_task_functions_are_awaited_and_checked(client: shardq.Client, dsn: str) -> None:
    app = shardq.App(dsn)

    @app.task(queue="aw")
    def greet(name: str, punctuation: str = "!") -> None:
        del name, punctuation

    async def scenario() -> list[shardq.TaskInfo | None]:
        one = await greet.aenqueue("ada", delay_s=60)
        many = await greet.aenqueue_many([("bob",), {"name": "eve", "punctuation": "?"}])
        with pytest.raises(shardq.InvalidTask, match="missing a required argument"):
            await greet.aenqueue()
        aclient = await app.async_client()
        infos = [await aclient.get(i) for i in [one, *many]]
        await aclient.close()
        return infos

    infos = asyncio.run(scenario())
    assert [i.payload["args"] if i else None for i in infos] == [["ada"], ["bob"], []]
    assert infos[2] is not None
    assert infos[2].payload["kwargs"] == {"name": "eve", "punctuation": "?"}
    assert infos[0] is not None
    assert infos[0].state == "scheduled"
    assert len(rows(dsn, "aw")) == 3  # the refused call wrote nothing


def test_the_event_loop_runs_while_a_statement_is_in_flight(client: shardq.Client,
                                                            dsn: str) -> None:
    async def scenario() -> int:
        ticks = 0
        async with shardq.AsyncClient(dsn) as aclient:
            slow = asyncio.ensure_future(aclient.perform(single(Fetch("SELECT pg_sleep(0.5)"))))
            while not slow.done():
                await asyncio.sleep(0.01)
                ticks += 1
            await slow
        return ticks

    assert asyncio.run(scenario()) > 5  # the loop served the ticker meanwhile


def test_opening_fails_with_shardqs_errors(databases: Any) -> None:
    bare = databases.create(migrated=False)

    async def open_on(url: str, **settings: Any) -> None:
        async with shardq.AsyncClient(url, **settings):
            pass

    with pytest.raises(shardq.SchemaNotReady, match="shardq migrate"):
        asyncio.run(open_on(bare))
    with pytest.raises(shardq.Unavailable, match="cannot connect"):
        asyncio.run(open_on("postgresql://nobody@127.0.0.1:1/none", connect_timeout_s=1))
    with pytest.raises(shardq.ConfigError, match="unsupported scheme"):
        asyncio.run(open_on("mysql://root@localhost/app"))


def test_a_client_must_be_opened_first_and_closes_twice_quietly(dsn: str) -> None:
    async def scenario() -> None:
        aclient = shardq.AsyncClient(dsn)
        with pytest.raises(RuntimeError, match="not open"):
            await aclient.get("00000000-0000-0000-0000-000000000000")
        await aclient.open()
        assert await aclient.get("00000000-0000-0000-0000-000000000000") is None
        await aclient.close()
        await aclient.close()

    asyncio.run(scenario())


def test_a_call_validates_after_its_first_suspension_and_its_await_raises(dsn: str) -> None:
    """A call's arguments are checked once it is awaited and has passed the turnstile
    (:mod:`shardq.core.turnstile`), so a burst of calls never checks all at once in one
    turn of the loop: making the coroutine raises nothing, awaiting it does."""
    async def scenario() -> list[Any]:
        async with shardq.AsyncClient(dsn) as aclient:
            refused = aclient.enqueue("no spaces allowed", {"n": 1})  # not raised here
            with pytest.raises(shardq.InvalidTask, match="queue"):
                await refused
            burst: list[Coroutine[Any, Any, object]] = [
                aclient.enqueue("aturn", {"n": n}) for n in range(3 * 16 + 1)]
            burst.append(aclient.enqueue_many("aturn", [{"n": n} for n in range(49, 1049)]))
            await asyncio.gather(*burst)
        return rows(dsn, "aturn")

    assert len(asyncio.run(scenario())) == 1049
