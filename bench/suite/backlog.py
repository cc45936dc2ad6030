"""Scenarios 4 (backlog scaling) and 5 (sharding ablation), shardq's worker daemon.

Backlog: one database per configuration (N waiting; N waiting plus tasks locked in
flight; N waiting plus tasks scheduled a day ahead), filled server-side (:func:`fill`)
and VACUUM ANALYZEd.  Each run starts the worker and times it through
``backlog_drain`` tasks (never running the queue dry), then samples single claim
statements (``Client.claim_bucket(limit=100)`` then ``ack_many``, round-robin
buckets) on the warm queue, then tops the waiting tasks back up and CHECKPOINTs.
Configurations alternate per repetition.

Ablation: one database per bucket count; each run tops the queue up to
``ablation_tasks`` and times the worker, with C claimers, through 80% of them.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

import shardq
from bench import harness
from bench.suite.settings import SHARDQ, Settings

Record = dict[str, Any]
QUEUE = harness.QUEUE
CONSUME = SHARDQ.consume  # the drain scenario's shardq worker


def add_locked(url: str, n: int) -> None:
    """Add ``n`` tasks held by a (fictional) worker whose lease runs for another hour."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO shardq.tasks (queue, payload, status, exec_time, lease_token, attempts,"
            " times_claimed, first_claimed_at, last_claimed_at) "
            "SELECT %(q)s, jsonb_build_object('n', g), 'locked', now() + interval '1 hour', "
            "gen_random_uuid(), 1, 1, now(), now() FROM generate_series(1, %(n)s) g",
            {"q": QUEUE, "n": n})


def add_future(url: str, n: int) -> None:
    """Add ``n`` tasks not due before tomorrow."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO shardq.tasks (queue, payload, exec_time) "
            "SELECT %(q)s, jsonb_build_object('n', g), now() + interval '1 day' "
            "FROM generate_series(1, %(n)s) g", {"q": QUEUE, "n": n})


def waiting(url: str) -> int:
    """Tasks of the bench queue that are available and due."""
    with psycopg.connect(url, autocommit=True) as conn:
        return int(harness.scalar(
            conn, "SELECT count(*) FROM shardq.tasks WHERE queue = %s AND status = %s "
            "AND exec_time <= now()", (QUEUE, "available")))


def fill(url: str, n: int) -> None:
    """Add ``n`` waiting tasks server-side, in enqueue order, then VACUUM ANALYZE.

    Unlike one ``now()`` for all rows, each row stands a microsecond after the one
    before (ending an hour ago), as if enqueued one after the other: a bucket's
    oldest tasks then sit in neighbouring heap pages, as they do in a real queue.
    With equal exec_times a claim would take them in random id order from all over
    the heap, which is an artifact of the fill, not of shardq.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        if n > 0:
            conn.execute(
                "INSERT INTO shardq.tasks (queue, payload, exec_time, enqueued_at) "
                "SELECT %(q)s, jsonb_build_object('n', g), t, t FROM generate_series(1, %(n)s) g, "
                "LATERAL (SELECT now() - interval '1 hour' + (g - %(n)s) * interval '1 microsecond'"
                ") AS s(t)", {"q": QUEUE, "n": n})
        conn.execute("VACUUM ANALYZE shardq.tasks")


def top_up(url: str, target: int) -> None:
    """Bring the waiting tasks back to ``target``, VACUUM ANALYZE and CHECKPOINT."""
    fill(url, max(0, target - waiting(url)))
    harness.checkpoint(url)


def claim_latencies(url: str, samples: int) -> list[float]:
    """Milliseconds of ``samples`` single claim statements (limit 100), each then acked."""
    out: list[float] = []
    with shardq.Client(url, pool_max_size=2) as client:
        n = client.bucket_count
        for i in range(samples):
            began = time.perf_counter()
            tasks = client.claim_bucket(QUEUE, i % n, limit=100)
            out.append((time.perf_counter() - began) * 1000.0)
            if tasks:
                client.ack_many(tasks)
    return out


def drain_rate(url: str, n: int, consume: dict[str, Any]) -> Record:
    """Run the worker through ``n`` tasks; its rate, CPU and RSS."""
    out = harness.call({"system": "shardq", "mode": "consume", "url": url, "n": n,
                        "deadline_s": 60 + n / 200, **consume})
    handled = out["handled"]
    return {"tasks": handled, "rate": handled / out["elapsed_s"] if out["elapsed_s"] else 0.0,
            "cpu_ms_per_1k": out["cpu_s"] * 1e6 / max(1, handled)}


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Backlog scaling: drain rate and claim latency per backlog configuration."""
    configs: list[tuple[str, int, int, int]] = [(f"{b:,} waiting", b, 0, 0)
                                                for b in settings.backlogs]
    if settings.with_big:
        configs.append((f"{settings.big_backlog:,} waiting", settings.big_backlog, 0, 0))
    small = settings.backlogs[0]
    configs += [(f"{small:,} waiting + {settings.in_flight:,} locked", small,
                 settings.in_flight, 0),
                (f"{small:,} waiting + {settings.future:,} future", small, 0, settings.future)]
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        urls: dict[str, str] = {}
        for name, n_wait, n_locked, n_future in configs:
            harness.log(f"backlog: building '{name}'")
            url = urls[name] = dbs.migrated(16)
            if n_locked:
                add_locked(url, n_locked)
            if n_future:
                add_future(url, n_future)
            top_up(url, n_wait)
        for rep in range(settings.reps):
            k = rep % len(configs)
            for name, n_wait, _, _ in configs[k:] + configs[:k]:
                url = urls[name]
                out = drain_rate(url, min(settings.backlog_drain, int(0.6 * n_wait)), CONSUME)
                claims = claim_latencies(url, settings.claim_samples)  # warm, as in steady state
                records.append({"scenario": "backlog", "config": name, "waiting": n_wait,
                                "rep": rep, **out,
                                "claim_p50_ms": harness.percentile(claims, 50),
                                "claim_p99_ms": harness.percentile(claims, 99)})
                harness.log(f"backlog rep {rep + 1} {name}: {out['rate']:,.0f} tasks/s, claim "
                            f"p50 {harness.percentile(claims, 50):.2f} ms")
                top_up(url, n_wait)


def run_ablation(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Sharding ablation: bucket counts x claimer counts, worker drain rate."""
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        urls = {b: dbs.migrated(b) for b in settings.ablation_buckets}
        grid = [(b, c) for b in settings.ablation_buckets for c in settings.ablation_claimers]
        for rep in range(settings.reps):
            k = (rep * 5) % len(grid)
            for buckets, claimers in grid[k:] + grid[:k]:
                url = urls[buckets]
                top_up(url, settings.ablation_tasks)
                consume = {**CONSUME, "claimers": claimers}
                out = drain_rate(url, int(0.8 * settings.ablation_tasks), consume)
                records.append({"scenario": "ablation", "buckets": buckets, "claimers": claimers,
                                "rep": rep, **out})
                harness.log(f"ablation rep {rep + 1} {buckets} buckets x {claimers} claimers: "
                            f"{out['rate']:,.0f} tasks/s")
