"""Who waits on whom while many connections claim.

    python -m bench.fleet_locks [CLIENTS] [TASKS]

Runs the suite's pgbench claim + ack (:func:`bench.suite.ceiling.drain`) once on 1
bucket and once on 16, on a fresh embedded server, while a thread samples every 20 ms
the active backends of the database: their wait state, which statement each runs
(claim or ack), and which statement the backend blocking it runs
(``pg_blocking_pids``).  Prints the shares; writes nothing.  The suite's section 7
samples the wait states alone; this attributes them.
"""

from __future__ import annotations

import sys
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


def attribute(url: str, buckets: int, clients: int, tasks: int) -> None:
    """One pgbench claim+ack run on database ``url``, sampled; print the shares."""
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
    print(f"== {buckets} bucket(s), {clients} clients: {out['rate']:,.0f} tasks/s, {n} samples")
    for (state, kind), count in states.most_common(8):
        print(f"  {count / total:6.1%} of active samples: {kind} in {state}")
    for (state, kind, blocker), count in blocked.most_common(5):
        print(f"  {count / n:6.2f} per sample: {kind} in {state}, blocked by {blocker}")


def main() -> None:
    """Run 1 then 16 buckets and print who waited on whom."""
    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    tasks = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    with harness.fresh_server(None, fleet.MAX_CONNECTIONS) as (_admin, _description, dbs):
        for buckets in (1, 16):
            attribute(dbs.migrated(buckets), buckets, clients, tasks)


if __name__ == "__main__":
    main()
