"""A small end-to-end run: enqueue tasks, consume them with a few threads, print the rates."""

from __future__ import annotations

import threading
import time
from typing import TextIO

from shardq.client import Client

QUEUE = "demo"


def _consume(client: Client, done: list[int], lock: threading.Lock, limit: int) -> None:
    misses = 0
    while misses < 2:  # two full rounds over every bucket with nothing eligible: drained
        tasks = client.claim(QUEUE, limit=limit)
        if not tasks:
            misses += 1
            continue
        misses = 0
        client.ack_many(tasks)
        with lock:
            done[0] += len(tasks)


def run(client: Client, *, tasks: int, threads: int, limit: int, out: TextIO) -> int:
    """Enqueue ``tasks`` tasks, drain them with ``threads`` claimers, report; returns tasks done."""
    start = time.perf_counter()
    for first in range(0, tasks, 5000):
        client.enqueue_many(QUEUE, [{"n": n} for n in range(first, min(first + 5000, tasks))])
    enqueued_s = time.perf_counter() - start
    print(f"enqueued {tasks} tasks in {enqueued_s:.2f}s ({tasks / enqueued_s:,.0f}/s) "
          f"into {client.bucket_count} buckets", file=out)

    done, lock = [0], threading.Lock()
    workers = [threading.Thread(target=_consume, args=(client, done, lock, limit))
               for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    consumed_s = time.perf_counter() - start
    print(f"claimed and acked {done[0]} tasks in {consumed_s:.2f}s "
          f"({done[0] / consumed_s:,.0f}/s) with {threads} threads, {limit} per claim", file=out)
    print(f"queue now: {client.stats(QUEUE)}", file=out)
    return done[0]
