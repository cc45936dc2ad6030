"""shardq driven through its public API: ``Client.enqueue``/``enqueue_many`` and the worker.

The consumer is the same :class:`shardq.worker.daemon.Worker` that ``shardq consume``
runs (``shardq/worker/run.py`` only adds signal handling around it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg

import shardq
from bench import harness
from bench.suite.cpu import tree_usage
from bench.suite.probe import QUEUE, Probe, hold_depth, send_paced
from shardq.core.config import ClientConfig, load
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker

NAME = "shardq"
ROOT = Path(__file__).resolve().parents[2]
DEPTH_SQL = "SELECT count(*) FROM shardq.tasks WHERE queue = %s"  # an ack deletes its task


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
    if int(spec.get("processes", 1)) > 1 or spec.get("cli"):
        consume_processes(url, spec, probe, ready)
        return
    app = shardq.App()

    if spec.get("kind") == "async":
        @app.handler(QUEUE)
        async def noop_async(payload: Any) -> None:
            probe.hit(payload)
    else:
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


def hold(url: str, depth: int, ready: Callable[[], None]) -> dict[str, Any]:
    """Hold the queue at ``depth`` waiting tasks with ``enqueue_many`` (:func:`hold_depth`)."""
    with shardq.Client(url, pool_max_size=2) as client:
        client.enqueue("warmup", {})
        return hold_depth(url, depth, DEPTH_SQL, lambda first, n: client.enqueue_many(
            QUEUE, [{"n": i} for i in range(first, first + n)]), ready)


def noop(payload: Any) -> None:
    """The multi-process consumer's raw handler: the work is nothing."""
    del payload


def consume_processes(url: str, spec: dict[str, Any], probe: Probe,
                      ready: Callable[[], None]) -> None:
    """Run ``shardq consume --processes N`` as a user would, until the queue is empty.

    The queue is paused while the processes start (on two cores eight of them take
    seconds to import and connect, and the first would drain the queue alone
    meanwhile): the clock starts when every worker process has logged that it is
    consuming and the queue is resumed (whose NOTIFY wakes them), and it counts the
    tasks queued then.  The handlers run in other processes, so the probe cannot count
    their starts: the run ends when the table holds none of the queue's tasks (every
    task started and acked), read every 10 ms.  CPU and memory are the supervisor's
    and its children's, from the clock's start.
    """
    with shardq.Client(url, pool_max_size=1) as client:
        client.pause(QUEUE, create=True)  # its tasks may not be enqueued yet
    ready()
    daemon, all_consuming = start_cli(url, spec)
    deadline = time.monotonic() + float(spec["deadline_s"])
    try:
        with psycopg.connect(url, autocommit=True) as conn, \
                shardq.Client(url, pool_max_size=1) as client:
            all_consuming.wait(max(0.0, deadline - time.monotonic()))
            tree = psutil.Process(daemon.pid)
            cpu0 = tree_usage(tree)[0]
            probe.target = _queued(conn)
            client.resume(QUEUE)
            probe.start()
            while not probe.done.is_set() and time.monotonic() < deadline:
                cpu, rss = tree_usage(tree)
                probe.handled_elsewhere(probe.target - _queued(conn), cpu - cpu0, rss)
                time.sleep(0.01)
    finally:
        stop_cli(daemon)


def start_cli(url: str, spec: dict[str, Any]) -> tuple[subprocess.Popen[str], threading.Event]:
    """Start ``shardq consume`` on the bench queue as a user would, with the flags of
    ``spec`` (processes, batch, claimers, concurrency, and ``flags``: any others), and
    its ``handler`` (a module:function, by default :func:`noop`); and an event set once every worker
    process has logged that it is consuming.  Its log is read to the end in a thread
    (a full pipe would block it).  Stop it with :func:`stop_cli`."""
    processes = int(spec.get("processes", 1))
    flags = [f"--{key}={int(spec[key])}" for key in ("processes", "batch", "claimers",
                                                      "concurrency") if spec.get(key)]
    command = [sys.executable, "-m", "shardq", "consume", spec.get("handler", f"{__name__}:noop"),
               f"--queue={QUEUE}", "--shutdown-grace-s=5", *flags, *spec.get("flags", [])]
    # Started where the shardq this runner imported lives: a runner of an earlier
    # tree (bench.harness.spawn's ``tree``) then runs that tree's worker too (``-m``
    # puts its directory first on the path; PYTHONPATH still finds this tree's bench).
    imported = Path(shardq.__file__).resolve().parent.parent
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    daemon = subprocess.Popen(command, env={**os.environ, "SHARDQ_DSN": url, "PYTHONPATH": path},
                              cwd=imported,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    all_consuming = threading.Event()

    def watch_log() -> None:
        assert daemon.stderr is not None
        seen = 0
        for line in daemon.stderr:  # read to the end, or the daemon blocks on a full pipe
            if "consuming" in line:
                seen += 1
                if seen >= processes:
                    all_consuming.set()

    threading.Thread(target=watch_log, daemon=True).start()
    return daemon, all_consuming


@contextlib.contextmanager
def consuming(url: str, spec: dict[str, Any]) -> Iterator[subprocess.Popen[str]]:
    """:func:`start_cli` once every worker process consumes (the daemon, for its pid);
    stopped when the block ends."""
    daemon, all_consuming = start_cli(url, spec)
    try:
        if not all_consuming.wait(120):
            raise harness.RunnerError("the workers never started consuming")
        yield daemon
    finally:
        stop_cli(daemon)


def stop_cli(daemon: subprocess.Popen[str]) -> None:
    """SIGTERM a daemon of :func:`start_cli` and wait for it to exit."""
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(30)


def _queued(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(DEPTH_SQL, (QUEUE,)).fetchone()
    return int(row[0]) if row else 0
