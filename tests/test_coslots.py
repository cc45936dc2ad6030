"""Coroutine handler slots (shardq.worker.coslots): an app with async handlers runs its
slots as coroutines on one event loop, bounded by ``concurrency``; its plain handlers run
in threads; a lost lease cancels the coroutine and its slot goes on; a stop gives back
what outlives the grace."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg

import shardq
from shardq.core.task import TaskId
from shardq.worker.coslots import LoopSlots
from shardq.worker.slots import ThreadSlots
from tests.helpers import query, wait_for, worker_for

BARRIER_S = 20.0  # how long a handler waits for the others (a failure, never a timing)


def left(dsn: str, queue: str) -> int:
    """Tasks of ``queue`` still in the table (an ack deletes its task; a failed one stays,
    to be retried or dead)."""
    return int(query(dsn, "SELECT count(*) FROM shardq.tasks WHERE queue = %s", (queue,))[0][0])


def test_the_slots_kind_follows_the_apps_handlers(dsn: str) -> None:
    plain, mixed = shardq.App(dsn), shardq.App(dsn)

    @plain.task(queue="k")
    def one() -> None: ...

    @mixed.task(queue="k")
    def two() -> None: ...

    @mixed.task(queue="k")
    async def three() -> None: ...

    threads, loop = worker_for(dsn, plain), worker_for(dsn, mixed)
    try:
        assert isinstance(threads.slots, ThreadSlots)
        assert isinstance(loop.slots, LoopSlots)
    finally:  # never started: their clients' pools are closed here, not by the collector
        threads.client.close()
        loop.client.close()


def test_coroutine_handlers_run_together_on_one_loop_within_concurrency(dsn: str) -> None:
    app = shardq.App(dsn)
    all_in = asyncio.Event()
    seen: dict[str, Any] = {"running": 0, "peak": 0, "threads": set(), "loops": set(),
                            "ids": set()}

    @app.task(queue="co")
    async def meet(n: int) -> int:
        seen["running"] += 1
        seen["peak"] = max(seen["peak"], seen["running"])
        seen["threads"].add(threading.current_thread().name)
        seen["loops"].add(id(asyncio.get_running_loop()))
        seen["ids"].add(shardq.current().task.id)
        if seen["running"] == 8:  # eight at once: the first eight meet here
            all_in.set()
        await asyncio.wait_for(all_in.wait(), BARRIER_S)
        seen["running"] -= 1
        return n

    ids = meet.enqueue_many([(n,) for n in range(24)])
    worker = worker_for(dsn, app, concurrency=8)
    worker.start()
    try:
        wait_for(lambda: left(dsn, "co") == 0, timeout=60, interval=0.05, what="every task")
    finally:
        worker.stop(grace_s=5)
    assert seen["peak"] == 8  # all eight slots at once, and never more
    assert seen["threads"] == {"shardq-asyncio"}
    assert len(seen["loops"]) == 1
    assert seen["ids"] == set(ids)  # each handler saw its own task as the current one


def test_a_mixed_apps_plain_handlers_run_in_threads_with_their_task_bound(dsn: str) -> None:
    app = shardq.App(dsn)
    runs: dict[str, list[tuple[str, Any]]] = {"plain": [], "coroutine": []}

    @app.task(queue="mixed")
    def plain(n: int) -> None:
        runs["plain"].append((threading.current_thread().name, shardq.current().task.id))

    @app.task(queue="mixed")
    async def coroutine(n: int) -> None:
        runs["coroutine"].append((threading.current_thread().name, shardq.current().task.id))

    plain_ids = plain.enqueue_many([(n,) for n in range(5)])
    coroutine_ids = coroutine.enqueue_many([(n,) for n in range(5)])
    worker = worker_for(dsn, app, concurrency=4)
    worker.start()
    try:
        wait_for(lambda: left(dsn, "mixed") == 0, timeout=60, interval=0.05, what="every task")
    finally:
        worker.stop(grace_s=5)
    assert sorted(i for _, i in runs["plain"]) == sorted(plain_ids)
    assert sorted(i for _, i in runs["coroutine"]) == sorted(coroutine_ids)
    assert all(name.startswith("shardq-slot") for name, _ in runs["plain"])
    assert {name for name, _ in runs["coroutine"]} == {"shardq-asyncio"}


def test_a_lost_lease_cancels_the_coroutine_and_its_slot_goes_on(
        dsn: str, client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    app = shardq.App(dsn)
    started = threading.Event()
    seen: list[str] = []

    @app.task(queue="lossy")
    async def hang(swallow: bool) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("swallowed" if swallow else "cancelled")
            if not swallow:
                raise
        return "done"

    @app.task(queue="after")
    async def after() -> None:
        seen.append("after")

    worker = worker_for(dsn, app, concurrency=1, lease_s=0.6)
    worker.start()
    try:
        def run_and_lose(swallow: bool) -> TaskId:
            started.clear()
            task_id = hang.enqueue(swallow)
            assert started.wait(10)
            told = len(seen)
            # Another claim takes over: the token changes under the running handler.
            connect.execute("UPDATE shardq.tasks SET lease_token = gen_random_uuid() "
                            "WHERE queue = 'lossy' AND status = 'locked'")
            wait_for(lambda: len(seen) > told, timeout=10, interval=0.05,
                     what="the handler's cancellation")
            return task_id

        # And a handler that swallows the cancellation: its slot goes on all the same.
        ids = [run_and_lose(False), run_and_lose(True)]
        after.enqueue()  # the one slot takes the next task
        wait_for(lambda: left(dsn, "after") == 0, timeout=10, interval=0.05,
                 what="the next task")
    finally:
        worker.stop(grace_s=5)
    assert seen == ["cancelled", "swallowed", "after"]
    for task_id in ids:
        info = client.get(task_id)
        assert info is not None
        assert info.state == "locked"  # not acked by the worker that lost it


def test_a_stop_gives_back_coroutines_that_outlive_the_grace(dsn: str,
                                                             client: shardq.Client) -> None:
    app = shardq.App(dsn)
    started = threading.Event()

    @app.task(queue="slow")
    async def slow(n: int) -> None:
        started.set()
        await asyncio.sleep(60)

    slow.enqueue_many([(n,) for n in range(10)])
    worker = worker_for(dsn, app, concurrency=2, batch=10, claimers=1)
    worker.start()
    assert started.wait(10)
    # No handler has finished yet, so the worker claims for its free slots only.
    wait_for(lambda: client.stats("slow")["locked"] == 2, timeout=10, interval=0.05,
             what="both slots to run")
    worker.stop(grace_s=1)
    stats = client.stats("slow")
    assert (stats["locked"], stats["available"]) == (0, 10)  # both back, none acked
    assert query(dsn, "SELECT max(attempts) FROM shardq.tasks") == [(0,)]  # no penalty
