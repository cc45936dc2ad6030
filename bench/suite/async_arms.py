"""The async scenario's arms, run in a runner process (``mode: "async"``).

Each arm enqueues through one client with a pool of ``POOL`` connections:

- ``shardq-async``: :class:`shardq.AsyncClient` (``enqueue`` / ``enqueue_many``);
- ``pgqueuer``: PGQueuer's ``Queries.enqueue`` on an asyncpg pool (``AsyncpgPoolDriver``);
- ``shardq-sync``: the blocking :class:`shardq.Client`, from threads instead of coroutines;
- ``shardq-blocking``: the blocking Client called straight from coroutines (what async
  code had to do before the AsyncClient: every call holds the event loop);
- ``idle``: the same coroutines, each sleeping about a round trip instead of enqueueing
  (what so many coroutines cost the loop by themselves).

``kind`` is ``single`` (each caller enqueues one task per call), ``batched`` (one batch
per call) or ``stall`` (``in_flight`` single enqueues and one batch of ``stall_batch``
started at once).  A ticker
coroutine sleeps ``TICK_S`` over and over on the same loop and notes how late it wakes:
the loop's stalls as any other request on it would feel them.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from pgqueuer import AsyncpgPoolDriver, Queries

import shardq
from bench.harness import percentile
from bench.suite.async_enqueue import POOL, TICK_S
from bench.suite.probe import QUEUE
from bench.suite.sys_pgqueuer import connect_kwargs

IDLE_S = 0.0005  # the idle arm's "enqueue": about one round trip, doing nothing
WARM_ROUNDS = 40  # at most, until the pool holds POOL connections
ARMS = ("shardq-async", "shardq-async-base", "pgqueuer", "shardq-sync", "shardq-blocking",
        "idle")


@dataclass
class Enqueuer:
    """One arm's calls: ``one(n)`` enqueues task n, ``many(n, size)`` tasks n..n+size-1;
    ``size()`` is how many connections its pool holds now."""

    one: Callable[[int], Awaitable[object]]
    many: Callable[[int, int], Awaitable[object]]
    size: Callable[[], int]


class Ticker:
    """Sleeps ``TICK_S`` over and over and records how late each wake-up is (ms)."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self._stop = asyncio.Event()

    async def _run(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.lags_ms.append((time.perf_counter() - began - TICK_S) * 1000.0)

    @asynccontextmanager
    async def ticking(self) -> AsyncIterator[None]:
        """Tick while the block runs; the wake-up after the block is recorded too."""
        task = asyncio.create_task(self._run())
        await asyncio.sleep(0)  # the ticker is asleep before the work starts
        try:
            yield
        finally:
            self._stop.set()
            await task

    def figures(self) -> dict[str, float]:
        """The largest and the 99th-percentile lag, and how many ticks there were."""
        return {"lag_max_ms": max(self.lags_ms, default=0.0),
                "lag_p99_ms": percentile(self.lags_ms, 99.0), "ticks": len(self.lags_ms)}


def _payloads(start: int, size: int) -> list[dict[str, int]]:
    return [{"n": start + k} for k in range(size)]


@asynccontextmanager
async def _shardq_async(url: str) -> AsyncIterator[Enqueuer]:
    async with shardq.AsyncClient(url, pool_max_size=POOL) as client:
        async def one(n: int) -> object:
            return await client.enqueue(QUEUE, {"n": n})

        async def many(n: int, size: int) -> object:
            return await client.enqueue_many(QUEUE, _payloads(n, size))

        pool = client.db.pool if client.db else None
        assert pool is not None
        yield Enqueuer(one, many, lambda: int(pool.get_stats()["pool_size"]))


@asynccontextmanager
async def _pgqueuer(url: str) -> AsyncIterator[Enqueuer]:
    async with asyncpg.create_pool(min_size=1, max_size=POOL, **connect_kwargs(url)) as pool:
        queries = Queries(AsyncpgPoolDriver(pool))

        async def one(n: int) -> object:
            return await queries.enqueue(QUEUE, json.dumps({"n": n}).encode())

        async def many(n: int, size: int) -> object:
            return await queries.enqueue([QUEUE] * size,
                                         [json.dumps(p).encode() for p in _payloads(n, size)],
                                         [0] * size)

        yield Enqueuer(one, many, lambda: int(pool.get_size()))


@asynccontextmanager
async def _shardq_blocking(url: str) -> AsyncIterator[Enqueuer]:
    with shardq.Client(url, pool_max_size=POOL) as client:
        async def one(n: int) -> object:
            return client.enqueue(QUEUE, {"n": n})  # holds the loop for the whole call

        async def many(n: int, size: int) -> object:
            return client.enqueue_many(QUEUE, _payloads(n, size))

        yield Enqueuer(one, many, lambda: POOL)  # calls never overlap: nothing to warm


@asynccontextmanager
async def _idle(url: str) -> AsyncIterator[Enqueuer]:
    del url

    async def one(n: int) -> object:
        await asyncio.sleep(IDLE_S)
        return n

    async def many(n: int, size: int) -> object:
        await asyncio.sleep(IDLE_S)
        return n

    yield Enqueuer(one, many, lambda: POOL)


OPEN = {"shardq-async": _shardq_async, "shardq-async-base": _shardq_async, "pgqueuer": _pgqueuer,
        "shardq-blocking": _shardq_blocking, "idle": _idle}


async def _warm(enq: Enqueuer, callers: int) -> None:
    """Rounds of ``callers`` concurrent enqueues (untimed) until the pool is full: both
    pools open connections on demand, and the run should not time that."""
    for _ in range(WARM_ROUNDS):
        await asyncio.gather(*(enq.one(-1) for _ in range(callers)))
        if enq.size() >= POOL:
            return


async def _measure(spec: dict[str, Any]) -> dict[str, Any]:
    kind, callers, calls, batch = (spec["kind"], int(spec["callers"]), int(spec["calls"]),
                                   int(spec["batch"]))
    async with OPEN[spec["arm"]](spec["url"]) as enq:
        await _warm(enq, callers)
        if kind == "stall":
            in_flight, size = int(spec["in_flight"]), int(spec["stall_batch"])
            work = [enq.one(n) for n in range(in_flight)]
            work.append(enq.many(in_flight, size))
            tasks = in_flight + size
        else:
            async def caller(c: int) -> None:
                for j in range(calls):
                    n = (c * calls + j) * batch
                    await (enq.many(n, batch) if kind == "batched" else enq.one(n))

            work = [caller(c) for c in range(callers)]
            tasks = callers * calls * (batch if kind == "batched" else 1)
        ticker = Ticker()
        gc.collect()  # the warm-up's garbage is not the run's: every run starts with none
        cpu0, began = time.process_time(), time.perf_counter()
        async with ticker.ticking():
            await asyncio.gather(*work)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu0
    return {"tasks": tasks, "seconds": seconds, "cpu_s": cpu, **ticker.figures()}


def _threads(spec: dict[str, Any]) -> dict[str, Any]:
    """The blocking Client from ``callers`` threads (the ``shardq-sync`` arm)."""
    kind, callers, calls, batch = (spec["kind"], int(spec["callers"]), int(spec["calls"]),
                                   int(spec["batch"]))
    with shardq.Client(spec["url"], pool_max_size=POOL) as client:
        with ThreadPoolExecutor(callers) as warming:  # until the pool holds POOL connections
            for _ in range(WARM_ROUNDS):
                list(warming.map(lambda _: client.enqueue(QUEUE, {"n": -1}), range(callers)))
                if client.db.pool.get_stats()["pool_size"] >= POOL:
                    break
        start = threading.Barrier(callers + 1)

        def caller(c: int) -> None:
            start.wait()
            for j in range(calls):
                n = (c * calls + j) * batch
                if kind == "batched":
                    client.enqueue_many(QUEUE, _payloads(n, batch))
                else:
                    client.enqueue(QUEUE, {"n": n})

        threads = [threading.Thread(target=caller, args=(c,)) for c in range(callers)]
        for t in threads:
            t.start()
        start.wait()
        cpu0, began = time.process_time(), time.perf_counter()
        for t in threads:
            t.join()
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu0
    tasks = callers * calls * (batch if kind == "batched" else 1)
    return {"tasks": tasks, "seconds": seconds, "cpu_s": cpu}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """One arm's run of one kind; spec: arm, kind, url, callers, calls, batch, in_flight."""
    if spec["arm"] not in ARMS:
        raise ValueError(f"unknown arm {spec['arm']!r}")
    if spec["arm"] == "shardq-sync":
        return _threads(spec)
    return asyncio.run(_measure(spec))
