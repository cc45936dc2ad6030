"""What counting throughput costs the writes: enqueue and ack with and without the count.

``stats()`` reads recent rates from ``shardq.throughput``, which every enqueue and ack
statement adds to in the same statement (``sql/throughput_add.sql``).  This runs the
statements shardq sends (counted) against the same statements without the count
(the insert or delete alone, composed from the same fragments), alternating the two
in each repetition on one fresh database:

- enqueue: single-task enqueues from ``--threads`` threads for ``--seconds``;
- ack: ``ack_many`` of claimed batches of ``--batch`` tasks (only the ack is timed).

    python -m bench.throughput_cost [--seconds 4] [--reps 3] [--threads 1,4]
        [--batch 100] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

import shardq
from bench import harness
from shardq.core import sqlfiles
from shardq.core.task import TaskId, addresses
from shardq.ops import produce

QUEUE = "cost"


def statements() -> dict[str, dict[str, sql.Composed]]:
    """Each workload's statement, counted (as shipped) and plain (the count left out)."""
    insert_one = sqlfiles.query("insert_one", "postgresql", "bucket", fragment=True)
    locate = sqlfiles.query("locate", "postgresql", "bucket", fragment=True)
    return {
        "enqueue": {
            "counted": sqlfiles.query("enqueue", "postgresql", "bucket"),
            "plain": sql.SQL("WITH ins AS ({}) SELECT ins.id FROM ins").format(insert_one)},
        "ack": {
            "counted": sqlfiles.query("ack_many", "postgresql", "bucket"),
            "plain": sql.SQL("DELETE FROM shardq.tasks AS t USING unnest(%(ids)s::uuid[], "
                             "%(tokens)s::uuid[]) AS a(id, lease_token) {} "
                             "RETURNING t.id").format(locate)},
    }


def enqueue_run(url: str, query: sql.Composed, threads: int, seconds: float) -> list[float]:
    """Latencies (ms) of single enqueues from ``threads`` threads."""
    latencies: list[float] = []
    with shardq.Client(url, notify=False) as client:
        params = produce.placement(client.statements, QUEUE, None, None, 0, None)

        def start(_: int) -> Callable[[], bool]:
            conn = psycopg.connect(url, autocommit=True)

            def step() -> bool:
                (task_id,) = TaskId.made_from(TaskId.random_values(1))
                began = time.perf_counter()
                conn.execute(query, {**params, "id": task_id, "payload": produce.jsonb("{}")})
                latencies.append((time.perf_counter() - began) * 1000)
                return True

            return step

        harness.run_threads(threads, seconds, start)
    return latencies


def ack_run(url: str, query: sql.Composed, threads: int, seconds: float,
            batch: int) -> list[float]:
    """Latencies (ms) of acks of ``batch`` claimed tasks from ``threads`` threads."""
    latencies: list[float] = []
    with shardq.Client(url, notify=False) as client:
        def start(index: int) -> Callable[[], bool]:
            conn = psycopg.connect(url, autocommit=True)
            bucket = [index]

            def step() -> bool:
                tasks = client.claim_bucket(QUEUE, bucket[0] % client.bucket_count,
                                            limit=batch)
                bucket[0] += threads
                if not tasks:
                    return True
                began = time.perf_counter()
                conn.execute(query, {**addresses(tasks), "now": None,
                                     "attempts_kept": client.config.attempts_kept_per_task})
                latencies.append((time.perf_counter() - began) * 1000)
                return True

            return step

        harness.run_threads(threads, seconds, start)
    return latencies


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and write bench/results/throughput_cost[-quick].md."""
    parser = argparse.ArgumentParser(prog="python -m bench.throughput_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", default="1,4")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="one short repetition")
    harness.add_server_argument(parser)
    args = parser.parse_args(argv)
    seconds, reps = (0.3, 1) if args.quick else (args.seconds, args.reps)
    counts = [int(t) for t in args.threads.split(",")]
    results: dict[tuple[str, int, str], list[float]] = {}
    with harness.server(args.dsn) as (admin, described), harness.Databases(admin) as dbs:
        url = dbs.migrated(16)
        harness.fill_backlog(url, 400_000, QUEUE)
        for _ in range(reps):
            for workload, variants in statements().items():
                for threads in counts:
                    for variant, query in variants.items():
                        run: Any = (enqueue_run(url, query, threads, seconds)
                                    if workload == "enqueue"
                                    else ack_run(url, query, threads, seconds, args.batch))
                        results.setdefault((workload, threads, variant), []).extend(run)
        lines = ["# Throughput counting: the cost on enqueue and ack", "",
                 *harness.machine_lines(admin, described), "",
                 f"{reps} repetition(s) of {seconds:g} s per cell, variants alternating; "
                 f"acks of {args.batch} claimed tasks; single-task enqueues.", ""]
    rows = []
    for (workload, threads, variant), lat in sorted(results.items()):
        rows.append([workload, threads, variant, len(lat), harness.median(lat),
                     harness.percentile(lat, 95)])
    lines.append(harness.markdown_table(
        ["statement", "threads", "variant", "statements", "median ms", "p95 ms"], rows))
    name = harness.result_name("throughput_cost", args.quick)
    path = harness.write_result(name, "\n".join(lines))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
