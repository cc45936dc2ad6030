"""Procrastinate driven through its documented API: ``defer_async``, ``batch_defer_async``
and ``App.run_worker_async`` with ``concurrency`` (async task, as its concurrency how-to
advises), over a ``PsycopgConnector`` on the embedded server's unix socket.

Workers delete successful jobs (``delete_jobs="successful"``) so that, like shardq and
PGQueuer, finished work leaves the jobs table; Procrastinate's default keeps them.  A
consumer's spec may ask for a sync task (``kind``: Procrastinate runs it in a thread) and
a handler that sleeps ``sleep_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import procrastinate

from bench.suite.probe import QUEUE, Probe, hold_depth, send_paced_async

NAME = "procrastinate"
CONCURRENCY = 10
DEPTH_SQL = ("SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s "
             "AND status IN ('todo', 'doing')")  # jobs not finished


def _app(url: str, probe: Probe | None = None, spec: dict[str, Any] | None = None
         ) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    spec = spec or {}
    sleep_s = float(spec.get("sleep_ms") or 0) / 1000

    if spec.get("kind") == "sync":
        @app.task(name=QUEUE, queue=QUEUE)
        def noop_sync(**kwargs: Any) -> None:
            if probe is not None:
                probe.hit(kwargs)
            if sleep_s:
                time.sleep(sleep_s)
    else:
        @app.task(name=QUEUE, queue=QUEUE)
        async def noop(**kwargs: Any) -> None:
            if probe is not None:
                probe.hit(kwargs)
            if sleep_s:
                await asyncio.sleep(sleep_s)

    return app


def setup(url: str) -> None:
    """Apply Procrastinate's schema."""
    async def go() -> None:
        app = _app(url)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
    asyncio.run(go())


def enqueue(url: str, n: int, batch: int) -> dict[str, Any]:
    """Enqueue ``n`` jobs: ``defer_async`` each, or ``batch_defer_async`` batches."""
    async def go() -> dict[str, Any]:
        app = _app(url)
        task = app.tasks[QUEUE]
        async with app.open_async():
            await app.configure_task("warmup", queue="warmup").defer_async()
            began = time.perf_counter()
            if batch <= 1:
                for i in range(n):
                    await task.defer_async(n=i)
            else:
                for start in range(0, n, batch):
                    jobs: list[dict[str, Any]] = [{"n": i}
                                                  for i in range(start, min(n, start + batch))]
                    await task.batch_defer_async(*jobs)
            return {"seconds": time.perf_counter() - began, "tasks": n}
    return asyncio.run(go())


def consume(url: str, spec: dict[str, Any], probe: Probe, ready: Callable[[], None]) -> None:
    """Run a worker until ``probe`` saw its target or the deadline passed."""
    logging.getLogger("procrastinate").setLevel(logging.WARNING)

    async def go() -> None:
        app = _app(url, probe, spec)
        async with app.open_async():
            ready()
            probe.start()
            worker = asyncio.create_task(app.run_worker_async(
                queues=[QUEUE], concurrency=int(spec.get("concurrency") or CONCURRENCY),
                delete_jobs="successful", install_signal_handlers=False,
                shutdown_graceful_timeout=5.0))
            deadline = time.monotonic() + float(spec["deadline_s"])
            while not probe.done.is_set() and time.monotonic() < deadline and not worker.done():
                await asyncio.sleep(0.005)
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
    asyncio.run(go())


def produce(url: str, rate: float, seconds: float) -> dict[str, Any]:
    """Defer single jobs carrying their send time ``t`` at ``rate`` per second."""
    async def go() -> dict[str, Any]:
        app = _app(url)
        task = app.tasks[QUEUE]
        async with app.open_async():
            await app.configure_task("warmup", queue="warmup").defer_async()
            return await send_paced_async(rate, seconds,
                                          lambda: task.defer_async(t=time.time()))
    return asyncio.run(go())


def hold(url: str, depth: int, ready: Callable[[], None]) -> dict[str, Any]:
    """Hold the queue at ``depth`` waiting jobs with ``batch_defer_async``
    (:func:`hold_depth`)."""
    app = _app(url)
    task = app.tasks[QUEUE]
    async def open_app() -> None:
        await app.open_async()

    with asyncio.Runner() as runner:
        runner.run(open_app())
        try:
            runner.run(app.configure_task("warmup", queue="warmup").defer_async())

            def enqueue(first: int, n: int) -> None:
                jobs: list[dict[str, Any]] = [{"n": first + i} for i in range(n)]
                runner.run(task.batch_defer_async(*jobs))

            return hold_depth(url, depth, DEPTH_SQL, enqueue, ready)
        finally:
            runner.run(app.close_async())
