"""Scenarios 7 (fleet ceiling) and 8 (worker processes): do the buckets pay with many claimers?

Fleet ceiling: pgbench runs shardq's own claim (limit 100) + ack statements
(:mod:`bench.suite.ceiling`) from C client connections against a database of B
buckets, one database per bucket count on one server whose ``max_connections``
admits the largest C.  pgbench uses one thread per core: its clients wait on the
server, and more threads would only compete with the server for the two cores.
Each run tops the queue up to ``fleet_tasks`` and stops at 80% of it.  While it
runs, a sampler reads ``pg_stat_activity`` every 20 ms (what the bench database's
active backends wait on), and around it the index statistics of ``shardq.tasks``
(index entries read and index pages touched per task: the entries a claim steps
over, dead ones and ones other claims locked, show up there).

Worker processes: ``shardq consume --processes N`` (defaults: batch 100, 2
claimers and 8 handler threads per process), started with the queue paused and
timed from its resume until ``worker_tasks`` tasks are gone, against each bucket
count.  Within a repetition, each client or process count runs every bucket
count back to back, in an order that rotates from one repetition to the next.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from typing import Any

import psycopg

from bench import harness
from bench.suite import backlog, ceiling
from bench.suite.settings import Settings

Record = dict[str, Any]
LIMIT = 100  # tasks per claim: the worker's default batch
SAMPLE_S = 0.02
# Room for the largest client count plus the sampler, the harness and the worker
# processes' pools; PostgreSQL's default of 100 would refuse pgbench's 128 clients.
MAX_CONNECTIONS = 300


def _rotated(items: tuple[int, ...], rep: int) -> list[int]:
    k = rep % len(items)
    return list(items[k:] + items[:k])


class WaitSampler:
    """Samples what the active backends of one database wait on, in a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="wait-sampler")

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(SAMPLE_S):
                rows = conn.execute(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*) "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND state = 'active' AND pid <> pg_backend_pid() GROUP BY 1").fetchall()
                self.samples += 1
                for event, n in rows:
                    self.counts[str(event)] += int(n)

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def shares(self, top: int = 5) -> dict[str, float]:
        """The ``top`` states' shares of all active-backend samples (CPU = not waiting)."""
        total = sum(self.counts.values())
        return {event: n / total for event, n in self.counts.most_common(top)} if total else {}

    def mean_active(self) -> float:
        """Active backends per sample, on average."""
        return sum(self.counts.values()) / self.samples if self.samples else 0.0


def index_counters(url: str) -> tuple[int, int]:
    """(index entries read, index pages hit or read) of ``shardq.tasks`` so far."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes "
            "        WHERE schemaname = 'shardq' AND relname = 'tasks'), "
            "       (SELECT coalesce(idx_blks_hit + idx_blks_read, 0) FROM pg_statio_user_tables "
            "        WHERE schemaname = 'shardq' AND relname = 'tasks')").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def ceiling_run(url: str, buckets: int, clients: int, settings: Settings) -> Record:
    """One pgbench claim+ack run: its rate, wait-event shares and index work per task."""
    backlog.top_up(url, settings.fleet_tasks)
    time.sleep(harness.SETTLE_S)  # the fill's statistics, flushed before the baseline
    tuples0, pages0 = index_counters(url)
    threads = min(clients, os.cpu_count() or 1)
    with WaitSampler(url) as sampler:
        out = ceiling.drain(url, buckets, LIMIT, clients, settings.fleet_tasks, threads)
    time.sleep(harness.SETTLE_S)  # pgbench's backends flush their statistics as they exit
    tuples1, pages1 = index_counters(url)
    done = max(1.0, out["tasks"])
    return {**out, "threads": threads, "waits": sampler.shares(),
            "active": sampler.mean_active(), "idx_tup_per_task": (tuples1 - tuples0) / done,
            "idx_pages_per_task": (pages1 - pages0) / done}


def run_ceiling(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Fleet ceiling: bucket counts x client connections, pgbench claim+ack."""
    with harness.fresh_server(dsn, MAX_CONNECTIONS) as (_admin, _description, dbs):
        urls = {b: dbs.migrated(b) for b in settings.fleet_buckets}
        for rep in range(settings.reps):
            for clients in settings.fleet_clients:
                for buckets in _rotated(settings.fleet_buckets, rep):
                    out = ceiling_run(urls[buckets], buckets, clients, settings)
                    records.append({"scenario": "fleet_ceiling", "buckets": buckets,
                                    "clients": clients, "rep": rep, **out})
                    top = next(iter(out["waits"]), "-")
                    harness.log(f"fleet ceiling rep {rep + 1} {buckets} buckets x {clients} "
                                f"clients: {out['rate']:,.0f} tasks/s (mostly {top}; "
                                f"{out['idx_tup_per_task']:.1f} index entries/task)")


def run_workers(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Worker processes: ``shardq consume --processes N`` x bucket counts."""
    with harness.fresh_server(dsn, MAX_CONNECTIONS) as (_admin, _description, dbs):
        urls = {b: dbs.migrated(b) for b in settings.worker_buckets}
        for rep in range(settings.reps):
            for processes in settings.worker_processes:
                for buckets in _rotated(settings.worker_buckets, rep):
                    url = urls[buckets]
                    backlog.top_up(url, settings.worker_tasks)
                    out = backlog.drain_rate(url, settings.worker_tasks,
                                             {"processes": processes, "cli": True})
                    records.append({"scenario": "fleet_worker", "buckets": buckets,
                                    "processes": processes, "rep": rep, **out})
                    harness.log(f"worker rep {rep + 1} {buckets} buckets x {processes} "
                                f"processes: {out['rate']:,.0f} tasks/s")
