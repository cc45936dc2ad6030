"""PGQueuer driven through its documented API: ``Queries.enqueue`` and ``QueueManager.run``.

One asyncpg connection per process (PGQueuer's own examples), the unix socket of
the embedded server as host; ``batch_size`` is ``QueueManager.run``'s.  A consumer
given ``concurrency`` C runs at most C jobs at once: ``max_concurrent_tasks=C`` with
``batch_size=C // 2`` (PGQueuer wants the cap at least twice the batch).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import asyncpg
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
from psycopg.conninfo import conninfo_to_dict

from bench.suite.probe import QUEUE, Probe, hold_depth, send_paced_async

NAME = "pgqueuer"
# Jobs not finished: a finished job leaves the table (its status goes to pgqueuer_log).
DEPTH_SQL = ("SELECT count(*) FROM pgqueuer WHERE entrypoint = %s "
             "AND status IN ('queued', 'picked')")


def connect_kwargs(url: str) -> dict[str, Any]:
    """asyncpg's connection arguments for the database ``url`` names."""
    info = conninfo_to_dict(url)
    return {"host": info.get("host"), "port": int(info.get("port") or 5432),
            "user": info.get("user"), "database": info.get("dbname"),
            "password": info.get("password") or None}


async def _connect(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(**connect_kwargs(url))


def setup(url: str) -> None:
    """Install PGQueuer's schema (``Queries.install``)."""
    async def go() -> None:
        conn = await _connect(url)
        try:
            await Queries(AsyncpgDriver(conn)).install()
        finally:
            await conn.close()
    asyncio.run(go())


def enqueue(url: str, n: int, batch: int) -> dict[str, Any]:
    """Enqueue ``n`` jobs: one call each, or list-valued ``Queries.enqueue`` batches."""
    async def go() -> dict[str, Any]:
        conn = await _connect(url)
        try:
            queries = Queries(AsyncpgDriver(conn))
            await queries.enqueue("warmup", b"{}")
            began = time.perf_counter()
            if batch <= 1:
                for i in range(n):
                    await queries.enqueue(QUEUE, json.dumps({"n": i}).encode())
            else:
                for start in range(0, n, batch):
                    size = min(n, start + batch) - start
                    await queries.enqueue(
                        [QUEUE] * size,
                        [json.dumps({"n": start + i}).encode() for i in range(size)],
                        [0] * size)
            return {"seconds": time.perf_counter() - began, "tasks": n}
        finally:
            await conn.close()
    return asyncio.run(go())


def consume(url: str, spec: dict[str, Any], probe: Probe, ready: Callable[[], None]) -> None:
    """Run a QueueManager until ``probe`` saw its target or the deadline passed."""
    async def go() -> None:
        conn = await _connect(url)
        try:
            qm = QueueManager(Queries(AsyncpgDriver(conn)))

            sleep_s = float(spec.get("sleep_ms") or 0) / 1000

            @qm.entrypoint(QUEUE)
            async def noop(job: Job) -> None:
                probe.hit(json.loads(job.payload) if job.payload else None)
                if sleep_s:
                    await asyncio.sleep(sleep_s)
                if probe.done.is_set():
                    qm.shutdown.set()

            async def deadline() -> None:
                await asyncio.sleep(float(spec["deadline_s"]))
                qm.shutdown.set()

            ready()
            probe.start()
            timer = asyncio.create_task(deadline())
            slots = int(spec.get("concurrency") or 0)
            if slots:
                await qm.run(batch_size=max(1, slots // 2), max_concurrent_tasks=slots)
            else:
                await qm.run(batch_size=int(spec.get("batch") or 10))
            timer.cancel()
        finally:
            await conn.close()
    asyncio.run(go())


def produce(url: str, rate: float, seconds: float) -> dict[str, Any]:
    """Enqueue single jobs carrying their send time ``t`` at ``rate`` per second."""
    async def go() -> dict[str, Any]:
        conn = await _connect(url)
        try:
            queries = Queries(AsyncpgDriver(conn))
            await queries.enqueue("warmup", b"{}")
            return await send_paced_async(rate, seconds, lambda: queries.enqueue(
                QUEUE, json.dumps({"t": time.time()}).encode()))
        finally:
            await conn.close()
    return asyncio.run(go())


def hold(url: str, depth: int, ready: Callable[[], None]) -> dict[str, Any]:
    """Hold the queue at ``depth`` waiting jobs with list-valued ``Queries.enqueue``
    (:func:`hold_depth`)."""
    with asyncio.Runner() as runner:
        conn = runner.run(_connect(url))
        try:
            queries = Queries(AsyncpgDriver(conn))
            runner.run(queries.enqueue("warmup", b"{}"))

            def enqueue(first: int, n: int) -> None:
                runner.run(queries.enqueue(
                    [QUEUE] * n, [json.dumps({"n": first + i}).encode() for i in range(n)],
                    [0] * n))

            return hold_depth(url, depth, DEPTH_SQL, enqueue, ready)
        finally:
            runner.run(conn.close())
