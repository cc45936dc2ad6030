"""Who waits on whom while many connections claim.

    python -m bench.fleet_locks [--clients 128] [--tasks 100000] [--quick] [--dsn URL]

Runs the suite's pgbench claim + ack (:func:`bench.suite.ceiling.drain`) once on 1
bucket and once on 16, on a fresh embedded server, while a thread samples every 20 ms
the active backends of the database: their wait state, which statement each runs
(claim or ack), and which statement the backend blocking it runs
(``pg_blocking_pids``).  Prints the shares and writes them to
``bench/results/fleet_locks.md``.  The suite's section 7
samples the wait states alone; this attributes them.
"""

from __future__ import annotations

import argparse
import threading
from collections import Counter

import psycopg

from bench import harness
from bench.suite import backlog, ceiling, fleet

# The statement a backend runs, by a fragment only that statement's text contains.
KIND = ("CASE WHEN {q} LIKE '%%DELETE FROM shardq.tasks%%' THEN 'ack' "
        "WHEN {q} LIKE '%%SKIP LOCKED%%' THEN 'claim' ELSE left({q}, 20) END")
SAMPLE = (
    "SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU'), "
    + KIND.format(q="a.query") + ", "
    "(SELECT string_agg(DISTINCT " + KIND.format(q="b.query") + ", ',') "
    " FROM pg_stat_activity b WHERE b.pid = ANY(pg_blocking_pids(a.pid))) "
    "FROM pg_stat_activity a WHERE a.datname = current_database() AND a.state = 'active' "
    "AND a.pid <> pg_backend_pid()")


def sample(url: str, stop: threading.Event, states: Counter[tuple[str, str]],
           blocked: Counter[tuple[str, str, str]]) -> int:
    """Sample until ``stop``: (wait state, statement) and (wait state, statement,
    blocker's statement) counts; returns the number of samples."""
    n = 0
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(fleet.SAMPLE_S):
            n += 1
            for state, kind, blocker in conn.execute(SAMPLE).fetchall():
                states[(state, kind)] += 1
                if blocker:
                    blocked[(state, kind, blocker)] += 1
    return n


def attribute(url: str, buckets: int, clients: int, tasks: int) -> list[str]:
    """One pgbench claim+ack run on database ``url``, sampled; the shares."""
    backlog.top_up(url, tasks)
    states: Counter[tuple[str, str]] = Counter()
    blocked: Counter[tuple[str, str, str]] = Counter()
    stop = threading.Event()
    samples: list[int] = []
    sampler = threading.Thread(
        target=lambda: samples.append(sample(url, stop, states, blocked)))
    sampler.start()
    out = ceiling.drain(url, buckets, fleet.LIMIT, clients, tasks, threads=2)
    stop.set()
    sampler.join()
    total, n = sum(states.values()) or 1, max(1, samples[0])
    lines = [f"## {buckets} bucket(s), {clients} clients: {out['rate']:,.0f} tasks/s, "
             f"{n} samples", ""]
    lines += [f"- {count / total:6.1%} of active samples: {kind} in {state}"
              for (state, kind), count in states.most_common(8)]
    lines += [f"- {count / n:6.2f} per sample: {kind} in {state}, blocked by {blocker}"
              for (state, kind, blocker), count in blocked.most_common(5)]
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    """Run 1 then 16 buckets; print and write who waited on whom."""
    p = argparse.ArgumentParser(prog="python -m bench.fleet_locks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=128)
    p.add_argument("--tasks", type=int, default=100_000)
    p.add_argument("--quick", action="store_true", help="8 clients, 2,000 tasks")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.tasks = 8, 2_000
    lines = ["# Who waits on whom while many connections claim", ""]
    with harness.fresh_server(args.dsn, fleet.MAX_CONNECTIONS) as (_admin, _description, dbs):
        for buckets in (1, 16):
            lines += attribute(dbs.migrated(buckets), buckets, args.clients, args.tasks)
    print(harness.write_result(harness.result_name("fleet_locks", args.quick),
                               "\n".join(lines)).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
