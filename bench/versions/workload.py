"""The workload ``bench.versions`` runs under each code tree, through the public API only.

    python bench/versions/workload.py URL TASKS THREADS   (shardq's tree on PYTHONPATH)

Migrates the database at URL with this tree's migrations, enqueues TASKS tasks in
batches of 1,000, then drains them with THREADS threads of ``claim(limit=100)`` +
``ack_many``; prints one JSON line with both rates.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import sys
import threading
import time

import shardq

# The migrations' module in this tree's layout: trees before the package layout (024cd62)
# kept it at the top of the package.
migrate = importlib.import_module(
    "shardq.core.migrate" if importlib.util.find_spec("shardq.core") else "shardq.migrate")

BATCH = 1_000
QUEUE = "bench"


def main() -> int:
    """Run the workload and print its rates."""
    url, tasks, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    migrate.upgrade(url, output=io.StringIO())
    with shardq.Client(url, pool_max_size=threads + 2, notify=False) as client:
        started = time.perf_counter()
        for start in range(0, tasks, BATCH):
            client.enqueue_many(QUEUE, [{"n": n} for n in range(start, min(tasks, start + BATCH))])
        enqueue_s = time.perf_counter() - started
        done = [0] * threads

        def drain(i: int) -> None:
            while True:
                batch = client.claim(QUEUE, limit=100)
                if not batch:
                    return
                client.ack_many(batch)
                done[i] += len(batch)

        workers = [threading.Thread(target=drain, args=(i,)) for i in range(threads)]
        started = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        drain_s = time.perf_counter() - started
    print(json.dumps({"enqueue_per_s": tasks / enqueue_s, "drain_per_s": sum(done) / drain_s}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
