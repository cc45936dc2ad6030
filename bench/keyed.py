"""What keyed tasks cost, and what unkeyed tasks pay for their existence (nothing).

``python -m bench.keyed [--quick]``: side by side on fresh databases, medians of
repetitions alternating the configurations:
- single enqueues: unkeyed, keyed with distinct keys, keyed on 50 hot keys (most
  coalesce);
- claim+ack of a backlog (2 threads, claim_bucket(limit=100) + ack_many): unkeyed
  against keyed with distinct keys.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

import shardq
from bench.common import (
    Databases,
    add_server_argument,
    machine_lines,
    markdown_table,
    median,
    server,
    write_result,
)

ENQUEUE_MODES: dict[str, Callable[[int], str | None]] = {
    "unkeyed": lambda n: None,
    "keyed, distinct keys": lambda n: f"key-{n}",
    "keyed, 50 hot keys": lambda n: f"hot-{n % 50}",
}


def enqueue_rate(url: str, n: int, key_of: Callable[[int], str | None]) -> float:
    """Single enqueues per second from one thread."""
    with shardq.Client(url, notify=False) as client:
        start = time.perf_counter()
        for i in range(n):
            client.enqueue("bench", {"n": i}, key=key_of(i))
        return n / (time.perf_counter() - start)


def drain_rate(url: str, n: int, keyed: bool, threads: int = 2) -> float:
    """Claim+ack tasks per second of ``threads`` claimers over a backlog of ``n``."""
    with shardq.Client(url, notify=False, pool_max_size=threads + 1) as client:
        for first in range(0, n, 5000):
            size = min(5000, n - first)
            keys = [f"k{first + i}" for i in range(size)] if keyed else None
            client.enqueue_many("bench", [{}] * size, keys=keys)
        done = [0] * threads

        def work(index: int) -> None:
            bucket, empty = index * client.bucket_count // threads, 0
            while empty < client.bucket_count:
                tasks = client.claim_bucket("bench", bucket, limit=100)
                bucket = (bucket + 1) % client.bucket_count
                empty = 0 if tasks else empty + 1
                if tasks:
                    client.ack_many(tasks)
                    done[index] += len(tasks)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return sum(done) / (time.perf_counter() - start)


def main() -> None:
    """Run both comparisons and write bench/results/keyed.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.keyed", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    add_server_argument(parser)
    args = parser.parse_args()
    reps, single, backlog = (1, 300, 3000) if args.quick else (args.reps, 3000, 50_000)
    enqueue: dict[str, list[float]] = {m: [] for m in ENQUEUE_MODES}
    drain: dict[str, list[float]] = {"unkeyed": [], "keyed, distinct keys": []}
    with server(args.dsn) as (admin, description), Databases(admin) as dbs:
        for rep in range(reps):
            for mode, key_of in ENQUEUE_MODES.items():
                enqueue[mode].append(enqueue_rate(dbs.migrated(16), single, key_of))
            for mode in drain:
                drain[mode].append(drain_rate(dbs.migrated(16), backlog, mode != "unkeyed"))
            print(f"rep {rep + 1}: {enqueue} {drain}", file=sys.stderr)
        lines = machine_lines(admin, description)
    base_e, base_d = median(enqueue["unkeyed"]), median(drain["unkeyed"])
    text = "\n".join([
        "# Keyed against unkeyed tasks", "", *lines,
        f"- {reps} rep(s), configurations alternated; 16 buckets", "",
        f"Single enqueues, one thread, {single:,} per run:", "",
        markdown_table(["mode", "median enqueues/s", "÷ unkeyed"],
                       [[m, median(r), median(r) / base_e] for m, r in enqueue.items()]), "",
        f"Claim+ack of a {backlog:,}-task backlog, 2 threads, limit 100:", "",
        markdown_table(["backlog", "median tasks/s", "÷ unkeyed"],
                       [[m, median(r), median(r) / base_d] for m, r in drain.items()]), ""])
    print(text)
    write_result("keyed-quick.md" if args.quick else "keyed.md", text)


if __name__ == "__main__":
    main()
