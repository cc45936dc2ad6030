"""shardq driven through its public API: ``Client.enqueue``/``enqueue_many`` and the worker.

The consumer is the same :class:`shardq.worker.daemon.Worker` that ``shardq consume``
runs (``shardq/worker/run.py`` only adds signal handling around it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import shardq
from bench.suite.probe import QUEUE, Probe, send_paced
from shardq.config import ClientConfig, load
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker

NAME = "shardq"


def setup(url: str) -> None:
    """Nothing to do: the parent migrates shardq's schema (:meth:`Databases.migrated`)."""
    del url


def enqueue(url: str, n: int, batch: int) -> dict[str, Any]:
    """Enqueue ``n`` tasks: one transaction each (``batch == 1``) or ``enqueue_many`` batches."""
    with shardq.Client(url, pool_max_size=2) as client:
        client.enqueue("warmup", {"warm": True})  # connection and statement warm-up, untimed
        began = time.perf_counter()
        if batch <= 1:
            for i in range(n):
                client.enqueue(QUEUE, {"n": i})
        else:
            for start in range(0, n, batch):
                client.enqueue_many(QUEUE, [{"n": i} for i in range(start, min(n, start + batch))])
        return {"seconds": time.perf_counter() - began, "tasks": n}


def consume(url: str, spec: dict[str, Any], probe: Probe, ready: Callable[[], None]) -> None:
    """Run a worker until ``probe`` saw its target or ``spec['deadline_s']`` passed."""
    app = shardq.App()

    @app.handler(QUEUE)
    def noop(payload: Any) -> None:
        probe.hit(payload)

    settings: dict[str, Any] = {"queue": (QUEUE,), "janitors": 1, "shutdown_grace_s": 5.0}
    for key in ("batch", "claimers", "concurrency"):
        if spec.get(key):
            settings[key] = int(spec[key])
    worker = Worker(app, load(ClientConfig, {"dsn": url}), WorkerConfig(**settings))
    ready()
    probe.start()
    worker.start()
    try:
        probe.done.wait(float(spec["deadline_s"]))
    finally:
        worker.stop(grace_s=5.0)


def produce(url: str, rate: float, seconds: float) -> dict[str, Any]:
    """Enqueue single tasks carrying their send time ``t`` at ``rate`` per second."""
    with shardq.Client(url, pool_max_size=2) as client:
        client.enqueue("warmup", {})
        return send_paced(rate, seconds, lambda: client.enqueue(QUEUE, {"t": time.time()}))
