"""How long ``stats()`` takes as the queue grows: 10k, 1M and 2M waiting tasks.

Each size gets a fresh database (16 buckets) filled server-side with one queue: 2 %
scheduled, 0.5 % locked and 0.5 % dead besides the due tasks, then VACUUM ANALYZE.
The median of ``--runs`` calls (after one warm-up) is reported with each figure's
value, its true count and the stated error.

    python -m bench.stats_cost [--sizes 10000,1000000,2000000] [--runs 21] [--dsn URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import psycopg

import shardq
from bench import harness

STATES = ("available", "scheduled", "locked", "dead")


def insert_range(url: str, first: int, last: int) -> None:
    """Tasks ``first``..``last`` of queue 'bulk', written server-side: 0.5 % locked,
    0.5 % dead, 2 % scheduled, the rest due (tests/test_stats_scale.py builds the same)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, status, exec_time, lease_token)
            SELECT 'bulk', '{}',
                   CASE g %% 200 WHEN 0 THEN 'locked' WHEN 1 THEN 'dead' ELSE 'available' END,
                   CASE WHEN g %% 200 = 0 THEN now() + interval '5 minutes'
                        WHEN g %% 200 BETWEEN 2 AND 5 THEN now() + interval '1 hour'
                        ELSE now() - interval '1 hour' + g * interval '1 ms' END,
                   CASE WHEN g %% 200 = 0 THEN gen_random_uuid() END
            FROM generate_series(%s::int, %s::int) AS g""", (first, last))


def fill(url: str, rows: int) -> None:
    """``rows`` tasks of queue 'bulk' (see :func:`insert_range`), then VACUUM ANALYZE."""
    insert_range(url, 1, rows)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE shardq.tasks")


def truth(url: str) -> dict[str, int]:
    """The true counts by state."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("""
            SELECT CASE WHEN status = 'available' AND exec_time > now() THEN 'scheduled'
                        ELSE status END, count(*)
            FROM shardq.tasks WHERE queue = 'bulk' GROUP BY 1""").fetchall()
    return {state: n for state, n in rows}


def main(argv: list[str] | None = None) -> int:
    """Measure and write bench/results/stats_cost.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.stats_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,1000000,2000000")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--quick", action="store_true", help="2,000 and 5,000 tasks, 3 calls")
    harness.add_server_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.runs = "2000,5000", 3
    rows = []
    with harness.server(args.dsn) as (admin, described), harness.Databases(admin) as dbs:
        for size in (int(s) for s in args.sizes.split(",")):
            url = dbs.migrated(16)
            fill(url, size)
            harness.checkpoint(url)  # the load's writes flushed before anything is timed
            with shardq.Client(url) as client:
                client.stats("bulk")
                times = []
                for _ in range(args.runs):
                    began = time.perf_counter()
                    stats = client.stats("bulk")
                    times.append((time.perf_counter() - began) * 1000)
            real = truth(url)
            cells = [f"{stats[s]:,} ({real.get(s, 0):,}" + (
                f", ±{stats['error'][s]:,})" if s in stats["error"] else ", exact)")
                for s in STATES]
            rows.append([size, statistics.median(times), max(times), *cells])
            dbs.close()
        lines = ["# stats() cost by queue size", "", *harness.machine_lines(admin, described),
                 "", f"Median and slowest of {args.runs} calls; each figure: value (true "
                 "count, stated error or exact).", ""]
    lines.append(harness.markdown_table(["tasks", "median ms", "max ms", *STATES], rows))
    name = harness.result_name("stats_cost", args.quick)
    path = harness.write_result(name, "\n".join(lines))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
