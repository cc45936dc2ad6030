"""The workload ``bench.history`` runs under each code tree, through the public API.

    python bench/history/workload.py URL TASKS THREADS MODE   (the tree on PYTHONPATH)

Migrates the database at URL with this tree's migrations and enqueues TASKS tasks in
batches of 1,000; then, after a CHECKPOINT (so that both trees start from the same
full-page-write state), drains them with THREADS threads of ``claim(limit=100)`` and,
with MODE ``once``, ``ack_many`` (every task succeeds at its first attempt), or with
MODE ``retry``, ``nack_many`` on the first claim and ``ack_many`` on the second (every
task fails once; the failed tasks are made due again between the two passes, outside
the measured time and WAL).  Where the tree records which worker claims (``worker_id``), a worker
row is registered and every claim names it, as ``shardq consume`` does.  Prints one
JSON line: tasks drained per second, and WAL bytes written per task during the drain.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import json
import sys
import threading
import time
import uuid
from typing import Any

import psycopg

import shardq

migrate = importlib.import_module(
    "shardq.core.migrate" if importlib.util.find_spec("shardq.core") else "shardq.migrate")

BATCH = 1_000
CLAIM = 100
QUEUE = "bench"


def lsn(url: str) -> int:
    """The server's current WAL position, in bytes."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def worker_identity(client: shardq.Client) -> dict[str, Any]:
    """The claim's worker argument where this tree has one (a registered worker)."""
    if "worker_id" not in inspect.signature(client.claim).parameters:
        return {}
    from shardq.ops import workers

    worker_id = uuid.uuid4()
    client.perform(workers.register(client.statements, worker_id, "bench", "localhost", 1,
                                    [QUEUE]))
    return {"worker_id": worker_id}


def main() -> int:
    """Run the workload and print its figures."""
    url, tasks, threads, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    migrate.upgrade(url, output=io.StringIO())
    with shardq.Client(url, pool_max_size=threads + 2, notify=False) as client:
        for start in range(0, tasks, BATCH):
            client.enqueue_many(QUEUE, [{"n": n} for n in range(start, min(tasks, start + BATCH))])
        who = worker_identity(client)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE shardq.tasks")
            conn.execute("CHECKPOINT")
        done = [0] * threads

        def drain(i: int, fail: bool) -> None:
            while True:
                batch = client.claim(QUEUE, limit=CLAIM, **who)
                if not batch:
                    return
                if fail:  # back in an hour: the pass ends when every task failed once
                    client.nack_many(batch, ["boom"] * len(batch),
                                     retry_in_s=[3600.0] * len(batch))
                else:
                    client.ack_many(batch)
                    done[i] += len(batch)

        drain_s, wal = 0.0, 0
        for fail in ([True, False] if mode == "retry" else [False]):
            if not fail:  # the failed tasks are due again, outside the measured windows
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("UPDATE shardq.tasks SET exec_time = now()")
            before = lsn(url)
            started = time.perf_counter()
            drainers = [threading.Thread(target=drain, args=(i, fail)) for i in range(threads)]
            for d in drainers:
                d.start()
            for d in drainers:
                d.join()
            drain_s += time.perf_counter() - started
            wal += lsn(url) - before
    print(json.dumps({"drain_per_s": sum(done) / drain_s, "wal_per_task": wal / sum(done),
                      "tasks": sum(done), "shardq": shardq.__file__}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
