"""Durable tasks measured with ``shardq consume`` worker processes, side by side.

1. Parked: the claim rate of a live queue (claims of 100 and their acks, one client,
   until its backlog is drained) in a database where 100,000 tasks of the same queue
   are parked (half on a day's sleep, half on an event nobody emits, each parked by a
   worker running its handler), against the same in a database with none parked.  The
   two databases are built once; each repetition drains a fresh backlog in each, in
   turns.
2. Wake-up: how late a handler resumes after what it waited for: tasks sleeping until
   due times spread over a few seconds (from the due time), and tasks waiting for
   events that are emitted all at once (10,000 emitted within one second, in batches
   of 1,000) or one by one (from the emit call's start).  The handler measures it on
   the machine's clock, where the bench measured the due time or the emit.
3. Database time: ``n`` durable tasks of 10 steps against ``n`` chains of 10 plain
   tasks (``shardq.chain``), each drained by the same workers in a fresh database.
   The database's time is the CPU time of the server's processes (the postmaster and
   every process under it: backends, and the background ones) over the drain, the
   workers' start and stop included.  ``pg_stat_database.active_time`` (the time the
   backends spent executing statements, read once every connection closed) is shown
   too, but it is a sum of latencies: 64 handler slots sending a checkpoint each at
   once on 2 cores count each other's waits for the CPU, where batched claims and acks
   do not.

Every run has a fresh database on one server.  ``python -m bench.durable`` writes
``bench/results/durable.md``.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg

import shardq
from bench import harness
from bench.durable import app
from bench.suite import sys_shardq
from bench.suite.cpu import server_cpu_s
from bench.suite.settings import SHARDQ_2P

Record = dict[str, Any]
SCENARIO = "durable"
HANDLER = "bench.durable.app:app"
WORKER = {**SHARDQ_2P.consume, "concurrency": 32, "handler": HANDLER}
KINDS = ("parked", "wake", "dbtime")
CLAIM = 100
EMIT_BATCH = 1_000


@dataclass(frozen=True)
class Sizes:
    """How big each measurement is."""

    parked: int = 100_000  # tasks parked beside the live queue
    live: int = 50_000  # the live queue's backlog, drained in each arm
    sleepers: int = 2_000  # tasks sleeping until due times...
    spread_s: float = 5.0  # ...spread over this many seconds
    waiters: int = 10_000  # tasks waiting for events emitted at once
    single: int = 200  # events emitted one by one
    tasks: int = 2_000  # durable tasks of 10 steps, and chains of 10
    processes: int = 2  # worker processes (the quick run starts one: a harness check)


QUICK = Sizes(parked=500, live=1_000, sleepers=50, spread_s=1.0, waiters=200, single=10,
              tasks=20, processes=1)


def workers(url: str, sizes: Sizes) -> AbstractContextManager[object]:
    """``shardq consume`` of the durable app, once every process consumes; stopped when
    the block ends."""
    return sys_shardq.consuming(url, {**WORKER, "processes": sizes.processes})


def count(url: str, query: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(harness.scalar(conn, query))


def wait_until(url: str, query: str, target: int, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while count(url, query) < target:
        if time.monotonic() > deadline:
            raise harness.RunnerError(f"{what}: {count(url, query)} of {target}")
        time.sleep(0.1)


PARKED = "SELECT count(*) FROM shardq.tasks WHERE parked IS NOT NULL AND exec_time > now()"
KEPT = "SELECT count(*) FROM shardq.results"


def park(url: str, n: int, sizes: Sizes) -> None:
    """``n`` tasks parked by workers running their handlers: half on sleeps, half on events."""
    with shardq.Client(url, pool_max_size=2) as client:
        app.app.use_client(client)
        for start in range(0, n, 10_000):
            app.parked.enqueue_many([(i, i % 2 == 1) for i in range(start, min(n, start + 10_000))])
    with workers(url, sizes):
        wait_until(url, PARKED, n, 300 + n / 100, "tasks parked")


def claim_rate(url: str, n: int) -> float:
    """Enqueue ``n`` live tasks, then claim (100 at a time) and ack them all: tasks/s."""
    harness.fill_backlog(url, n)
    with shardq.Client(url, pool_max_size=2) as client:
        client.claim(harness.QUEUE, limit=1)  # warm-up: connection, statements
        began, got = time.perf_counter(), 1
        while got < n:
            tasks = client.claim(harness.QUEUE, limit=CLAIM)
            if tasks:
                client.ack_many(tasks)
                got += len(tasks)
        return (n - 1) / (time.perf_counter() - began)


def parked_arms(dbs: harness.Databases, sizes: Sizes, reps: int, records: list[Record]) -> None:
    """Measurement 1."""
    quiet, busy = harness.prepare(dbs, "shardq"), harness.prepare(dbs, "shardq")
    park(busy, sizes.parked, sizes)
    for url in (quiet, busy):
        harness.checkpoint(url)
    for rep in range(reps):
        arms = [("none parked", quiet), ("parked", busy)]
        for arm, url in arms if rep % 2 == 0 else arms[::-1]:
            rate = claim_rate(url, sizes.live)
            records.append({"scenario": SCENARIO, "kind": "parked", "arm": arm, "rep": rep,
                            "parked": 0 if url == quiet else sizes.parked, "rate": rate})
            harness.log(f"durable parked rep {rep + 1} {arm}: {rate:,.0f} claims/s")
    dbs.close()


def latencies(url: str, n: int, timeout_s: float) -> list[float]:
    """The kept results of ``n`` wake-up measurements (seconds late), once all are in."""
    wait_until(url, KEPT, n, timeout_s, "handlers resumed")
    with psycopg.connect(url, autocommit=True) as conn:
        return [float(v) for (v,) in conn.execute("SELECT value FROM shardq.results")]


def reruns(url: str) -> dict[str, int]:
    """The attempts that ended otherwise than parked or acked (a lease that expired, a
    failure), by outcome: a run that had to be made again, which a late tail shows."""
    with psycopg.connect(url, autocommit=True) as conn:
        return dict(conn.execute("SELECT outcome, count(*) FROM shardq.attempts "
                                 "WHERE outcome NOT IN ('parked', 'acked') "
                                 "GROUP BY outcome").fetchall())


def wake(dbs: harness.Databases, sizes: Sizes, records: list[Record]) -> None:
    """Measurement 2: sleeps, a burst of emits, and emits one by one."""
    url = harness.prepare(dbs, "shardq")
    with workers(url, sizes), shardq.Client(url, pool_max_size=2) as client:
        app.app.use_client(client)
        first = time.time() + 3.0  # the sleepers park before the first is due
        app.sleeper.enqueue_many([(first + i * sizes.spread_s / sizes.sleepers,)
                                  for i in range(sizes.sleepers)])
        late = latencies(url, sizes.sleepers, 60 + sizes.spread_s)
        records.append({"scenario": SCENARIO, "kind": "wake", "arm": "sleep",
                        "tasks": sizes.sleepers, "late_s": late, "reruns": reruns(url)})
        harness.log(f"durable wake sleep: p99 {harness.percentile(late, 99) * 1000:.0f} ms")
    dbs.close()
    for arm, n in (("emit burst", sizes.waiters), ("emit one by one", sizes.single)):
        url = harness.prepare(dbs, "shardq")
        with workers(url, sizes), shardq.Client(url, pool_max_size=2) as client:
            app.app.use_client(client)
            for start in range(0, n, 10_000):
                app.waiter.enqueue_many([(i,) for i in range(start, min(n, start + 10_000))])
            wait_until(url, PARKED, n, 120 + n / 100, "waiters parked")
            began = time.perf_counter()
            if arm == "emit burst":  # n events within a second, in batches
                for k, start in enumerate(range(0, n, EMIT_BATCH)):
                    pause = began + k / max(1, n // EMIT_BATCH) - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    at = time.time()
                    client.emit_events({f"go-{i}": at for i in
                                        range(start, min(n, start + EMIT_BATCH))})
            else:
                for i in range(n):
                    client.emit_event(f"go-{i}", time.time())
                    time.sleep(0.02)
            emitted_s = time.perf_counter() - began
            late = latencies(url, n, 120 + n / 100)
            again = reruns(url)
        records.append({"scenario": SCENARIO, "kind": "wake", "arm": arm, "tasks": n,
                        "emitted_s": emitted_s, "late_s": late, "reruns": again})
        harness.log(f"durable wake {arm}: emitted in {emitted_s:.2f} s, p99 "
                    f"{harness.percentile(late, 99) * 1000:.0f} ms")
        dbs.close()


ACTIVE = "SELECT active_time FROM pg_stat_database WHERE datname = current_database()"
LEFT = "SELECT count(*) FROM shardq.tasks"


def active_ms(url: str) -> float:
    """The database's statement time so far, once the other backends reported theirs."""
    time.sleep(1.0)  # backends that just exited
    with psycopg.connect(url, autocommit=True) as conn:
        return float(harness.scalar(conn, ACTIVE))


def dbtime(dbs: harness.Databases, sizes: Sizes, reps: int, records: list[Record]) -> None:
    """Measurement 3."""
    arms = ("chains of 10", "10-step durable")
    for rep in range(reps):
        for arm in arms if rep % 2 == 0 else arms[::-1]:
            url = harness.prepare(dbs, "shardq")
            with shardq.Client(url, pool_max_size=2) as client:
                app.app.use_client(client)
                if arm == "chains of 10":
                    for i in range(sizes.tasks):
                        client.enqueue_flow(shardq.chain(*[app.noop.si(i)] * app.STEPS))
                else:
                    app.ten_steps.enqueue_many([(i,) for i in range(sizes.tasks)])
            before, cpu = active_ms(url), server_cpu_s(url)
            began = time.perf_counter()
            with workers(url, sizes):
                deadline = time.monotonic() + 300
                while count(url, LEFT):
                    if time.monotonic() > deadline:
                        raise harness.RunnerError(f"{arm}: tasks left after 300 s")
                    time.sleep(0.05)
                elapsed = time.perf_counter() - began
            spent = active_ms(url) - before
            cpu_ms = (server_cpu_s(url) - cpu) * 1000
            records.append({"scenario": SCENARIO, "kind": "dbtime", "arm": arm, "rep": rep,
                            "tasks": sizes.tasks, "db_ms": spent, "cpu_ms": cpu_ms,
                            "elapsed_s": elapsed})
            harness.log(f"durable dbtime rep {rep + 1} {arm}: server CPU {cpu_ms:,.0f} ms "
                        f"({cpu_ms / sizes.tasks:.2f} ms a task), statements {spent:,.0f} ms, "
                        f"{elapsed:.1f} s")
            dbs.close()


def run(settings: Any, dsn: str | None, records: list[Record]) -> None:
    """The suite's ``durable`` scenario (``--quick``: :data:`QUICK` sizes)."""
    measure(QUICK if settings.quick else Sizes(), settings.reps, dsn, records)


def measure(sizes: Sizes, reps: int, dsn: str | None, records: list[Record],
            kinds: tuple[str, ...] = KINDS) -> list[str]:
    """Run the measurements of ``kinds`` on a fresh server; the machine's lines."""
    with harness.fresh_server(dsn) as (admin, description, dbs):
        machine = harness.machine_lines(admin, description)
        if "parked" in kinds:
            parked_arms(dbs, sizes, reps, records)
        if "wake" in kinds:
            wake(dbs, sizes, records)
        if "dbtime" in kinds:
            dbtime(dbs, sizes, reps, records)
    return machine
