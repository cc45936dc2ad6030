"""Scenario 16: throughput with the queue held at a depth, handlers that take 1 ms.

A producer process holds ``depth_target`` jobs waiting through each system's public
enqueue call (shardq ``Client.enqueue_many``, PGQueuer list-valued ``Queries.enqueue``,
Procrastinate ``batch_defer_async``; :func:`bench.suite.probe.hold_depth`) while one
consumer process runs the jobs with C handler slots: ``shardq consume --concurrency C``
(:mod:`bench.suite.sleepers.sleepers`), or the runner's PGQueuer and Procrastinate
consumers (:data:`bench.suite.settings.DEPTH_VARIANTS`).  Jobs finished are counted by
the producer (enqueued less those still waiting or running, every 50 ms); the rate is
taken over ``depth_window_s`` after ``depth_warmup_s`` from the consumer's start, with
the consumer's and the server's CPU time over the same window.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from typing import Any

from bench import harness
from bench.harness import markdown_table
from bench.suite import sys_shardq
from bench.suite.cpu import load_1m, process_cpu_s, server_cpu_s
from bench.suite.probe import HOLD_TICK_S
from bench.suite.settings import DEPTH_VARIANTS, SHARDQ_ARMS, Settings, Variant
from bench.suite.stats import fmt_ratio, med, paired_ratio, rotated, select

Record = dict[str, Any]
SCENARIO = "depth"
SLEEP_MS = 1
GOAL_64 = 15_000.0  # jobs/s at 64 handler slots
PEERS = tuple(v.name for v in DEPTH_VARIANTS if v.name not in SHARDQ_ARMS)


@contextlib.contextmanager
def consumer(url: str, variant: Variant, concurrency: int, seconds: float) -> Iterator[int]:
    """The variant's consumer process, running for at least ``seconds``; yields its pid
    once it consumes."""
    kind = variant.consume["kind"]
    if variant.system == "shardq":
        spec = {"handler": f"bench.suite.sleepers.sleepers:{kind}_{SLEEP_MS}ms",
                "concurrency": concurrency}
        with sys_shardq.consuming(url, spec) as daemon:
            yield daemon.pid
        return
    proc = harness.spawn({"system": variant.system, "mode": "consume", "url": url,
                          "n": 10**12, "deadline_s": seconds, "kind": kind,
                          "sleep_ms": SLEEP_MS, "concurrency": concurrency})
    try:
        harness.wait_ready(proc)
        yield proc.pid
    except BaseException:
        proc.kill()
        raise
    harness.finish(proc, timeout=60)  # it stops at its deadline; raises if it failed


def run_one(url: str, variant: Variant, concurrency: int, settings: Settings) -> Record:
    """One run: the producer holds the depth, the consumer runs; the window's figures."""
    before = load_1m()
    producer = harness.spawn({"system": variant.system, "mode": "hold", "url": url,
                              "depth": settings.depth_target})
    try:
        harness.wait_ready(producer)
        # the consumer outlives the window and the sample that closes it
        with consumer(url, variant, concurrency,
                      settings.depth_warmup_s + settings.depth_window_s + 2.0) as pid:
            time.sleep(settings.depth_warmup_s)
            t0, worker0, pg0 = time.time(), process_cpu_s(pid), server_cpu_s(url)
            time.sleep(settings.depth_window_s)
            t1, worker1, pg1 = time.time(), process_cpu_s(pid), server_cpu_s(url)
            time.sleep(2 * HOLD_TICK_S)
    finally:
        producer.send_signal(signal.SIGTERM)
    samples = harness.finish(producer, timeout=60)["samples"]
    inside = [s for s in samples if t0 <= s[0] <= t1 + HOLD_TICK_S]
    if len(inside) < 2:
        raise harness.RunnerError(f"{variant.name}: the producer sampled too little")
    (s0, done0, _), (s1, done1, _) = inside[0], inside[-1]
    jobs, window = done1 - done0, t1 - t0
    rate = jobs / (s1 - s0)
    per_1k = 1e6 / max(1.0, rate * window)  # the CPU's window holds about rate x window jobs
    return {"rate": rate, "jobs": jobs,
            "min_depth": min(s[2] for s in inside),
            "worker_cpu_ms_per_1k": (worker1 - worker0) * per_1k,
            "pg_cpu_ms_per_1k": (pg1 - pg0) * per_1k,
            "worker_cpu_pct": 100 * (worker1 - worker0) / window,
            "pg_cpu_pct": 100 * (pg1 - pg0) / window, "load_1m_before": before}


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Every variant at every slot count, ``settings.reps`` times, the variants' order
    rotating; each run on a fresh database."""
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        for rep in range(settings.reps):
            for concurrency in settings.depth_concurrency:
                for v in rotated(DEPTH_VARIANTS, rep):
                    url = harness.prepare(dbs, v.system)
                    out = run_one(url, v, concurrency, settings)
                    dbs.close()
                    records.append({"scenario": SCENARIO, "variant": v.name,
                                    "concurrency": concurrency, "rep": rep, **out})
                    harness.log(f"depth rep {rep + 1} {v.name} x {concurrency}: "
                                f"{out['rate']:,.0f} jobs/s (depth ≥ {out['min_depth']})")


def _pick(records: list[Record], variant: str, concurrency: int) -> list[Record]:
    return select(records, SCENARIO, variant=variant, concurrency=concurrency)


def targets(records: list[Record], settings: Settings) -> list[list[object]]:
    """The depth goals: (goal, measured, met?); nothing when the scenario did not run."""
    out: list[list[object]] = []
    if not select(records, SCENARIO):
        return out
    for c in settings.depth_concurrency:
        pairs = [(paired_ratio(_pick(records, sq, c), _pick(records, peer, c), "rate"), sq, peer)
                 for sq in SHARDQ_ARMS for peer in PEERS]
        worst = min(pairs, default=(float("nan"), "", ""), key=lambda p: p[0])
        out.append([f"depth, {c} workers: shardq (sync and async) ahead of every PGQueuer "
                    "and Procrastinate arm (worst shardq ÷ peer > 1)",
                    f"{fmt_ratio(worst[0])} ({worst[1]} ÷ {worst[2]})",
                    "met" if worst[0] > 1 else "MISSED"])
    if 64 in settings.depth_concurrency:
        for sq in SHARDQ_ARMS:
            rate = med(_pick(records, sq, 64), "rate")
            out.append([f"depth, 64 workers, {sq}: ≥ {GOAL_64:,.0f} jobs/s",
                        f"{rate:,.0f} jobs/s ({fmt_ratio(rate / GOAL_64)} the goal)",
                        "met" if rate >= GOAL_64 else "MISSED"])
    return out


def section(records: list[Record], settings: Settings) -> list[str]:
    """Section 16 of the report (nothing when the scenario did not run)."""
    rs = select(records, SCENARIO)
    if not rs:
        return []
    rows: list[list[object]] = []
    for c in settings.depth_concurrency:
        for v in DEPTH_VARIANTS:
            mine = _pick(records, v.name, c)
            if not mine:
                continue
            rows.append([c, v.name, v.note, med(mine, "rate"),
                         ", ".join(f"{r['rate']:,.0f}" for r in mine),
                         *(fmt_ratio(paired_ratio(_pick(records, sq, c), mine, "rate"))
                           for sq in SHARDQ_ARMS),
                         med(mine, "worker_cpu_ms_per_1k"), med(mine, "pg_cpu_ms_per_1k"),
                         med(mine, "worker_cpu_pct"), med(mine, "pg_cpu_pct"),
                         min(r["min_depth"] for r in mine)])
    reps = len({r["rep"] for r in rs})
    return ["## 16. Throughput at a held queue depth (handlers that take 1 ms)", "",
            f"A producer process keeps {settings.depth_target:,} jobs waiting through each "
            "system's public batch enqueue (shardq `Client.enqueue_many`, PGQueuer "
            "list-valued `Queries.enqueue`, Procrastinate `batch_defer_async`), topping the "
            f"queue up every {HOLD_TICK_S * 1000:g} ms, while one consumer process runs the "
            f"jobs with C handler slots; each handler sleeps {SLEEP_MS} ms (sync: "
            "`time.sleep`, async: `asyncio.sleep`). Jobs finished = enqueued less those "
            f"still waiting or running; jobs/s over {settings.depth_window_s:g} s after "
            f"{settings.depth_warmup_s:g} s of warm-up from the consumer's start, medians "
            f"over {reps} repetition(s), each run on its own database, the systems' order "
            "rotating per repetition. CPU (psutil, user + system) over the same window: the "
            "consumer process (and its children), and PostgreSQL (the postmaster and every "
            "backend: the producer's inserts and counts included, they are the same for "
            "every system). Ratios are shardq's rate ÷ the row's (higher is better for "
            "shardq). `min depth` is the fewest jobs the producer counted waiting or "
            "running in the window (far below the target: the producer, not the consumer, "
            "set the pace).", "",
            markdown_table(["slots", "variant", "setting", "median jobs/s", "per rep",
                            *(f"{sq} ÷ it" for sq in SHARDQ_ARMS),
                            "consumer CPU ms/1k jobs", "PostgreSQL CPU ms/1k jobs",
                            "consumer CPU % of a core", "PostgreSQL CPU % of a core",
                            "min depth"], rows), "",
            "Goals:", "", markdown_table(["goal", "measured", ""], targets(records, settings)),
            ""]
