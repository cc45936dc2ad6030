"""Task results: kept by the worker's ack, read (and waited for) on both clients, expired
and deleted by the janitor, written once however often an ack runs."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.config import ClientConfig
from shardq.core.task import addresses
from shardq.ops import settle
from shardq.ops.results import CHANNEL, Kept, encode
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.clients import open_client
from tests.conftest import Databases
from tests.helpers import claim_all, expire_leases

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

# Handlers live at the module's top level: a suspect task's handler is imported by the
# process it runs alone in.
app = shardq.App()


@app.task(queue="kept", keep_result_s=600)
def add(a: int, b: int) -> dict[str, int]:
    """Return a sum, kept."""
    return {"sum": a + b}


@app.task(queue="kept", keep_result_s=600)
async def shout(word: str) -> str:
    """Return a word in capitals, kept (an async handler)."""
    return word.upper()


@app.task(queue="kept", keep_result_s=600)
def whose(n: int) -> dict[str, int]:
    """Return the id of the process running it, kept."""
    return {"n": n, "pid": os.getpid()}


@app.task(queue="kept")
def forgetful() -> int:
    """Return a value nobody keeps."""
    return 42


@app.task(queue="kept", keep_result_s=600)
def opaque() -> object:
    """Return a value JSON cannot hold."""
    return object()


@app.task(queue="kept", keep_result_s=600, max_attempts=1)
def broken() -> None:
    """Fail, on its only attempt."""
    raise ValueError("broken on purpose")


@app.handler("kept-raw", keep_result_s=600)
def double(payload: dict[str, int]) -> int:
    """A raw handler whose return value is kept."""
    return payload["n"] * 2


@pytest.fixture(autouse=True)
def no_results(dsn: str) -> Iterator[None]:
    """The shared database without results, before and after each test (a janitor of a
    later test's manual clock would find these expired)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE shardq.results")
        yield
        conn.execute("TRUNCATE shardq.results")


def kept_rows(connect: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return connect.execute("SELECT id, value, error FROM shardq.results ORDER BY id").fetchall()


def keep(value: Any, keep_s: float = 60) -> Kept:
    return Kept.of(encode(value), keep_s, 1_000_000)


def ack_keeping(client: shardq.Client, task: shardq.Task, value: Any,
                keep_s: float = 60) -> None:
    """Ack ``task`` as the worker does for a handler that keeps results."""
    client.perform(settle.ack(client.statements, [task], [keep(value, keep_s)]))


def one(client: shardq.Client, queue: str, **options: Any) -> tuple[uuid.UUID, shardq.Task]:
    """Enqueue one task of ``queue`` and claim it."""
    task_id = client.enqueue(queue, {}, **options)
    [task] = claim_all(client, queue)
    return task_id, task


def run_worker(dsn: str, client: shardq.Client, *queues: str, **settings: Any) -> None:
    """Run a worker of ``app`` until no task of ``queues`` is waiting or running."""
    app.use_client(client)
    worker = Worker(app, ClientConfig(dsn=dsn, **settings),
                    WorkerConfig(janitors=0, listen=False, ack_flush_ms=20))
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while any(client.stats(q)["available"] + client.stats(q)["locked"] for q in queues):
            assert time.monotonic() < deadline, [client.stats(q) for q in queues]
            time.sleep(0.05)
    finally:
        worker.stop(grace_s=5)


# -- kept by the worker ----------------------------------------------------------------------


@pytest.mark.blocking_client
def test_a_worker_keeps_what_handlers_return(dsn: str, client: shardq.Client,
                                             connect: psycopg.Connection[Any],
                                             caplog: pytest.LogCaptureFixture) -> None:
    app.use_client(client)
    ids = {"add": add.enqueue(2, 3), "shout": shout.enqueue("hi"),
           "double": client.enqueue("kept-raw", {"n": 21}), "forgetful": forgetful.enqueue(),
           "broken": broken.enqueue()}
    unkept = [opaque.enqueue() for _ in range(3)]
    with caplog.at_level(logging.WARNING, "shardq.worker"):
        run_worker(dsn, client, "kept", "kept-raw")

    added = client.result(ids["add"])
    assert (added.status, added.value, added.error, added.attempts, added.queue) == (
        "succeeded", {"sum": 5}, None, 1, "kept")
    assert added.enqueued_at is not None
    assert added.finished_at is not None
    assert added.finished_at >= added.enqueued_at
    assert client.result(ids["shout"]).value == "HI"
    assert client.result(ids["double"]).value == 42
    # No keep_result_s: the task is gone without a trace.
    assert client.result(ids["forgetful"]).status == "unknown"
    failed = client.result(ids["broken"])
    assert failed.status == "failed"
    assert failed.error is not None
    assert "ValueError: broken on purpose" in failed.error
    assert failed.finished_at is not None
    # A value JSON cannot hold: the task succeeded, its result says why it has no value.
    for task_id in unkept:
        found = client.result(task_id)
        assert (found.status, found.value) == ("succeeded", None)
        assert found.error is not None
        assert found.error.startswith("not kept: the return value is not JSON-serialisable")
    assert len([r for r in caplog.records if "cannot keep" in r.getMessage()]) == 1
    assert {r[0] for r in kept_rows(connect)} == {ids["add"], ids["shout"], ids["double"],
                                                  *unkept}

    async def read() -> shardq.TaskResult:
        async with shardq.AsyncClient(dsn) as aclient:
            return await aclient.result(ids["add"])

    assert asyncio.run(read()) == added


def deep_failure() -> None:
    """Fail a frame below the handler's."""
    raise ValueError("deep down")


@pytest.mark.blocking_client
@pytest.mark.parametrize("kind", ["thread slots", "coroutine slots"])
def test_a_failed_result_shows_the_handlers_frames_and_none_of_shardqs(
        dsn: str, client: shardq.Client, kind: str) -> None:
    frames = shardq.App(client=client)
    if kind == "thread slots":  # an app of plain functions only: no event loop
        @frames.task(queue="frames", keep_result_s=600, max_attempts=1)
        def fails() -> None:
            deep_failure()
    else:
        @frames.task(queue="frames", keep_result_s=600, max_attempts=1)
        async def fails() -> None:
            deep_failure()

    task_id = fails.enqueue()
    worker = Worker(frames, ClientConfig(dsn=dsn),
                    WorkerConfig(janitors=0, listen=False, ack_flush_ms=20))
    worker.start()
    try:
        found = client.result(task_id, wait_s=30)
    finally:
        worker.stop(grace_s=5)
    assert found.status == "failed"
    assert found.error is not None
    lines = found.error.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: deep down"
    assert "in fails" in found.error
    assert "in deep_failure" in found.error
    assert os.path.dirname(shardq.__file__) not in found.error


@pytest.mark.blocking_client
def test_a_suspect_task_run_alone_keeps_its_result(dsn: str, client: shardq.Client) -> None:
    app.use_client(client)
    task_id = whose.enqueue(7)
    # Its lease runs out unsettled, as when the worker holding it died: it comes back
    # suspect, and the next worker runs it in a process of its own.
    with shardq.Client(dsn, backoff_base_s=0.001) as rescuer:
        assert len(expire_leases(rescuer, "kept")) == 1
    run_worker(dsn, client, "kept")
    found = client.result(task_id)
    assert found.status == "succeeded"
    assert found.value["n"] == 7
    assert found.value["pid"] != os.getpid()  # the value came from the suspect's process


def test_keep_result_s_is_checked_when_a_handler_is_registered() -> None:
    other = shardq.App()
    with pytest.raises(shardq.ConfigError, match="keep_result_s of task 'zero' must be a "
                                                 "finite number between 1 and"):
        other.task(forgetful.fn, name="zero", keep_result_s=0)
    with pytest.raises(shardq.ConfigError, match="keep_result_s of queue 'raw'"):
        other.handler("raw", keep_result_s=float("nan"))(double)
    hourly: Any = "1h"
    with pytest.raises(shardq.ConfigError, match="keep_result_s of task 'tick'"):
        other.periodic(every_s=60, name="tick", keep_result_s=hourly)(forgetful.fn)
    assert (other.tasks, other.raw, other.schedules) == ({}, {}, {})


# -- what became of a task, on both clients -----------------------------------------------------


def test_what_became_of_a_task(client: shardq.Client) -> None:
    waiting = client.enqueue("states", {"n": 1})
    later = client.enqueue("states", {"n": 2}, delay_s=3600)
    found = client.result(waiting)
    assert (found.status, found.attempts, found.finished_at, found.queue) == (
        "pending", 0, None, "states")
    assert client.result(later).status == "pending"  # scheduled
    [task] = claim_all(client, "states")
    assert task.id == waiting
    running = client.result(str(waiting))  # an id's text will do
    assert (running.status, running.attempts) == ("running", 1)
    client.nack(task, "gave up", dead=True)
    dead = client.result(waiting)
    assert (dead.status, dead.error, dead.attempts) == ("failed", "gave up", 1)
    assert dead.finished_at is not None

    never = uuid.uuid4()
    assert client.result(never) == shardq.TaskResult(never, "unknown")
    # Acked by a client: done, and nothing kept.
    acked, task = one(client, "states")
    client.ack(task)
    assert client.result(acked).status == "unknown"


def test_a_result_is_read_back_as_kept(client: shardq.Client) -> None:
    task_id, task = one(client, "values")
    ack_keeping(client, task, {"rows": [1, 2.5, None, "x"], "ok": True})
    found = client.result(task_id)
    assert (found.status, found.value, found.error) == (
        "succeeded", {"rows": [1, 2.5, None, "x"], "ok": True}, None)
    returned_none, task = one(client, "values")
    ack_keeping(client, task, None)
    assert (client.result(returned_none).status, client.result(returned_none).value) == (
        "succeeded", None)


def test_results_are_checked_for_what_jsonb_can_hold() -> None:
    assert encode((1, "a")) == ("[1,\"a\"]", None)
    for value, why in [(float("nan"), "not JSON-serialisable"), ("a\x00b", "NUL"),
                       ({1, 2}, "not JSON-serialisable")]:
        text, error = encode(value)
        assert text is None
        assert error is not None
        assert error.startswith("not kept: the return value ")
        assert why in error
    big = Kept.of(encode("x" * 100), 60, max_bytes=50)
    assert (big.value, big.error) == (
        None, "not kept: the return value is 102 bytes of JSON, over max_payload_bytes (50)")


def test_a_bad_argument_is_refused_before_anything_is_sent(client: shardq.Client) -> None:
    with pytest.raises(shardq.InvalidTask, match="not a task id"):
        client.result("nope")
    with pytest.raises(shardq.InvalidTask, match="wait_s must not be negative"):
        client.result(uuid.uuid4(), wait_s=-1)


# -- which database an App's tasks go to -----------------------------------------------------


@pytest.mark.blocking_client
def test_an_app_bound_to_a_client_enqueues_where_the_client_reads(
        dsn: str, client: shardq.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHARDQ_DSN", raising=False)
    bound = shardq.App(client=client)

    @bound.task(queue="bound", keep_result_s=600)
    def noted() -> None:
        """Do nothing."""

    async def enqueue_async() -> shardq.TaskResult:
        try:  # the App's AsyncClient takes the bound client's settings
            return await (await bound.async_client()).result(await noted.aenqueue())
        finally:
            await bound.aclose()

    assert client.result(noted.enqueue()).status == "pending"
    assert asyncio.run(enqueue_async()).status == "pending"
    with pytest.raises(shardq.ConfigError, match="give no dsn or settings"):
        shardq.App(dsn, client=client)


@pytest.mark.blocking_client
def test_an_app_naming_no_database_beside_a_client_that_names_one_is_refused(
        client: shardq.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Else its tasks would go to the embedded database while the client reads another."""
    monkeypatch.delenv("SHARDQ_DSN", raising=False)
    unbound = shardq.App()

    @unbound.task(queue="unbound")
    def lost() -> None:
        """Do nothing."""

    with pytest.raises(shardq.ConfigError, match=r"names no database .* App\(client=\.\.\.\)"):
        lost.enqueue()
    with pytest.raises(shardq.ConfigError, match="names no database"):
        asyncio.run(lost.aenqueue())
    assert client.stats("unbound")["available"] == 0


# -- waiting ---------------------------------------------------------------------------------


@contextmanager
def soon(call: Callable[[], object]) -> Iterator[None]:
    """Run ``call`` in a thread a moment from now, while the test waits."""
    def later() -> None:
        time.sleep(0.3)
        call()

    thread = threading.Thread(target=later)
    thread.start()
    yield
    thread.join(10)


def test_a_wait_ends_when_the_ack_announces_the_result(client: shardq.Client, dsn: str,
                                                        databases: Databases) -> None:
    task_id, task = one(client, "waits")
    # Straight to the server: through a transaction pooler a LISTEN is left on whichever
    # server session ran it (the client itself then polls; see test_pooler.py).
    with psycopg.connect(databases.direct(dsn), autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        with soon(lambda: ack_keeping(client, task, "done")):
            found = client.result(task_id, wait_s=60)
        heard = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
    assert (found.status, found.value) == ("succeeded", "done")
    assert heard == [(CHANNEL, str(task_id))]


def test_a_wait_sees_a_task_die(client: shardq.Client) -> None:
    task_id, task = one(client, "waits")
    with soon(lambda: client.nack(task, "no luck", dead=True)):
        found = client.result(task_id, wait_s=60)
    assert (found.status, found.error) == ("failed", "no luck")


def test_a_wait_returns_what_the_task_is_when_it_ends(client: shardq.Client) -> None:
    task_id, _ = one(client, "waits")
    assert client.result(task_id, wait_s=0.2).status == "running"
    assert client.result(uuid.uuid4(), wait_s=0.2).status == "unknown"


def test_a_wait_without_notifications_looks_again_until_the_result_is_there(
        clocked: Callable[..., shardq.Client]) -> None:
    """As on CockroachDB, which has no LISTEN: here with notifications turned off."""
    polling = clocked(notify=False)
    task_id, task = one(polling, "waits")
    with soon(lambda: ack_keeping(polling, task, [3])):
        found = polling.result(task_id, wait_s=60)
    assert (found.status, found.value) == ("succeeded", [3])


@pytest.mark.blocking_client
def test_a_wait_gives_its_pooled_connection_back_without_listening(dsn: str,
                                                                  client: shardq.Client) -> None:
    task_id, _ = one(client, "waits")
    with shardq.Client(dsn, pool_max_size=1) as single:
        assert single.result(task_id, wait_s=0.1).status == "running"
        with single.db.pool.connection() as conn:
            assert conn.execute("SELECT pg_listening_channels()").fetchall() == []


@pytest.mark.parametrize("notify", [True, False], ids=["listening", "polling"])
def test_calls_waiting_for_results_leave_the_pool_to_enqueues(
        client: shardq.Client, client_kind: str, dsn: str, notify: bool) -> None:
    """More calls wait than the pool has connections: an enqueue still goes through while
    they all wait, and each call gets its task's result when the task ends."""
    waiters, found = 6, {}
    with open_client(client_kind, dsn, pool_max_size=2, notify=notify) as small:
        tasks = dict(one(small, "waits") for _ in range(waiters))
        asked = small.db.pool.get_stats().get("requests_num", 0)

        def wait(task_id: uuid.UUID) -> None:
            found[task_id] = small.result(task_id, wait_s=20)

        threads = [threading.Thread(target=wait, args=(tid,)) for tid in tasks]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        # Each call has asked the pool for its first look.
        while small.db.pool.get_stats().get("requests_num", 0) < asked + waiters:
            assert time.monotonic() < deadline, "the calls did not all look"
            time.sleep(0.01)
        small.enqueue("elsewhere", {})
        assert all(thread.is_alive() for thread in threads)  # it did not wait for them
        for task_id, task in tasks.items():
            ack_keeping(small, task, str(task_id))
        for thread in threads:
            thread.join(20)
    assert {tid: (r.status, r.value) for tid, r in found.items()} == {
        tid: ("succeeded", str(tid)) for tid in tasks}


@pytest.mark.blocking_client
def test_an_async_wait_lets_the_event_loop_run(dsn: str, client: shardq.Client) -> None:
    task_id, task = one(client, "waits")

    async def main() -> tuple[shardq.TaskResult, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        async def ack_after_ticks() -> None:
            # Only a loop that runs while result() waits gets here: else no ack, and the
            # wait would end with the task still running.
            while ticks < 20:
                await asyncio.sleep(0.01)
            await asyncio.to_thread(ack_keeping, client, task, "ticked")

        async with shardq.AsyncClient(dsn) as aclient:
            ticker = asyncio.create_task(tick())
            acker = asyncio.create_task(ack_after_ticks())
            found = await aclient.result(task_id, wait_s=60)
            ticker.cancel()
            await acker
        return found, ticks

    found, ticks = asyncio.run(main())
    assert (found.status, found.value) == ("succeeded", "ticked")
    assert ticks >= 20


@pytest.mark.blocking_client
def test_a_cancelled_async_wait_leaves_no_pooled_connection_listening(
        dsn: str, client: shardq.Client) -> None:
    task_id, _ = one(client, "waits")

    async def main() -> list[Any]:
        async with shardq.AsyncClient(dsn, pool_max_size=1) as aclient:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(aclient.result(task_id, wait_s=60), 0.3)
            assert aclient.db is not None
            assert aclient.db.pool is not None
            async with aclient.db.pool.connection() as conn:
                return await (await conn.execute("SELECT pg_listening_channels()")).fetchall()

    assert asyncio.run(main()) == []


# -- retention and retries -----------------------------------------------------------------


def test_results_expire_and_the_janitor_deletes_them_in_batches(
        clocked: Callable[..., shardq.Client], clock: shardq.ManualClock,
        connect: psycopg.Connection[Any]) -> None:
    timed = clocked(janitor_batch=2)
    timed.enqueue_many("expiry", [{"n": n} for n in range(5)])
    tasks = claim_all(timed, "expiry")
    timed.perform(settle.ack(timed.statements, tasks, [keep(t.payload["n"]) for t in tasks]))
    clock.advance(59)
    assert timed.run_janitor_once().expired_results == 0
    assert [timed.result(t.id).value for t in tasks] == [t.payload["n"] for t in tasks]
    clock.advance(2)
    # Past its expiry a result is gone at once, deleted or not.
    assert {timed.result(t.id).status for t in tasks} == {"unknown"}
    assert len(kept_rows(connect)) == 5
    assert timed.run_janitor_once().expired_results == 5
    assert kept_rows(connect) == []


def test_an_ack_run_again_after_a_lost_reply_keeps_one_result(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    task_id, task = one(client, "retried")
    ack = settle.ack(client.statements, [task], [keep({"v": 1})])
    client.perform(ack)
    client.perform(ack)  # the retry: the task is gone, so the ack counts as done
    assert kept_rows(connect) == [(task_id, {"v": 1}, None)]
    assert client.result(task_id).value == {"v": 1}


def test_the_ack_statement_run_twice_writes_one_result(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    """The statement a retry sends again after its reply was lost."""
    task_id, task = one(client, "retried")
    st = client.statements
    values = {**addresses([task]), "kept_ids": [task.id], "kept_values": ['"once"'],
              "kept_errors": [None], "keep_s": [60.0]}
    assert st.all("ack_results", values) == [(1, 1)]  # one task deleted, one result announced
    assert st.all("ack_results", values) == [(0, 0)]
    assert kept_rows(connect) == [(task_id, "once", None)]


def test_a_batch_keeps_the_results_of_the_tasks_that_asked(
        client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    client.enqueue_many("mixed", [{"n": n} for n in range(6)])
    tasks = claim_all(client, "mixed")
    kept = [keep(t.payload["n"]) if t.payload["n"] % 2 else None for t in tasks]
    client.perform(settle.ack(client.statements, tasks, kept))
    assert client.stats("mixed")["locked"] == 0
    assert sorted(r[1] for r in kept_rows(connect)) == [1, 3, 5]
    assert {client.result(t.id).status for t in tasks if t.payload["n"] % 2 == 0} == {"unknown"}


def test_an_ack_after_the_lease_was_lost_keeps_no_result(
        clocked: Callable[..., shardq.Client], clock: shardq.ManualClock,
        connect: psycopg.Connection[Any]) -> None:
    timed = clocked()
    task_id = timed.enqueue("lost", {})
    [task] = claim_all(timed, "lost", lease_s=10)
    clock.advance(11)
    assert timed.run_janitor_once().rescued == 1  # back in line, under no lease
    with pytest.raises(shardq.LeaseLost):
        ack_keeping(timed, task, "too late")
    assert kept_rows(connect) == []
    assert timed.result(task_id).status == "pending"
