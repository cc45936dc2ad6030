"""Scenario 9: enqueueing from asyncio code, and what it does to the event loop.

Throughput: ``async_callers`` concurrent coroutines enqueue single tasks, then batches,
through :class:`shardq.AsyncClient`, through PGQueuer's ``Queries.enqueue`` on an asyncpg
pool, and through the blocking :class:`shardq.Client` from as many threads; every client
has a pool of :data:`POOL` connections (the arms: :mod:`bench.suite.async_arms`).  Stall:
``async_in_flight`` single enqueues and one batch of ``async_stall_batch`` started at once
while a ticker coroutine on the same loop notes how late it wakes; the blocking Client
called from coroutines and a burst of
coroutines that only sleep (no enqueue) are the reference points.  Each run is its own
process and database on one server; within a repetition the arms alternate in a
rotating order.  With ``async_base`` (``--async-base DIR``: an export of an earlier
tree's ``shardq`` package and its SQL, ``git archive REV shardq sql | tar -x -C DIR``),
that tree's AsyncClient is one more arm of every measurement, side by side.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench import harness
from bench.harness import markdown_table
from bench.suite.settings import Settings
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]
POOL = 8  # connections per client: shardq's default pool_max_size
TICK_S = 0.001  # the ticker's sleep
SCENARIO = "async_enqueue"
THROUGHPUT_ARMS = ("shardq-async", "pgqueuer", "shardq-sync")
STALL_ARMS = ("shardq-async", "pgqueuer", "shardq-blocking", "idle")
LABEL = {"shardq-async": "shardq AsyncClient", "pgqueuer": "PGQueuer (asyncpg pool)",
         "shardq-sync": "shardq Client, threads",
         "shardq-blocking": "shardq Client called in coroutines (blocks the loop)",
         "idle": "no enqueue: the coroutines only sleep",
         "shardq-async-base": "shardq AsyncClient of the base tree (--async-base)"}
STALL_GOAL_MS = 10.0
BATCHED_GOAL = 1.5


def _rotated(arms: tuple[str, ...], rep: int) -> list[str]:
    k = rep % len(arms)
    return list(arms[k:] + arms[:k])


def _runs(settings: Settings) -> list[tuple[str, int, tuple[str, ...]]]:
    """(kind, batch, arms) of each measurement of a repetition."""
    base = ("shardq-async-base",) if settings.async_base else ()
    return [("single", 1, THROUGHPUT_ARMS + base),
            *(("batched", b, THROUGHPUT_ARMS + base) for b in settings.async_batches),
            ("stall", 1, STALL_ARMS + base)]


def _measure(dbs: Any, arm: str, kind: str, batch: int, settings: Settings) -> Record:
    url = "" if arm == "idle" else harness.prepare(dbs, "pgqueuer" if arm == "pgqueuer"
                                                   else "shardq")
    callers = settings.async_callers
    tasks = settings.async_batched_tasks if kind == "batched" else settings.async_single_tasks
    tree = Path(settings.async_base).resolve() if arm == "shardq-async-base" else None
    out = harness.call({"system": "shardq", "mode": "async", "arm": arm, "kind": kind,
                        "url": url, "callers": callers, "batch": batch,
                        "calls": max(1, tasks // (callers * batch)),
                        "in_flight": settings.async_in_flight,
                        "stall_batch": settings.async_stall_batch}, timeout=600, tree=tree)
    return {**out, "rate": out["tasks"] / out["seconds"],
            "cpu_ms_per_1k": out["cpu_s"] * 1000.0 / out["tasks"] * 1000.0}


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Every arm of every measurement, ``settings.reps`` times, on one fresh server."""
    with harness.fresh_server(dsn) as (_, _, dbs):
        for rep in range(settings.reps):
            for kind, batch, arms in _runs(settings):
                for arm in _rotated(arms, rep):
                    out = _measure(dbs, arm, kind, batch, settings)
                    records.append({"scenario": SCENARIO, "kind": kind, "batch": batch,
                                    "arm": arm, "rep": rep, **out})
                    lag = (f", loop lag max {out['lag_max_ms']:.1f} ms"
                           if "lag_max_ms" in out else "")
                    harness.log(f"async {kind} x{batch} rep {rep + 1} {arm}: "
                                f"{out['rate']:,.0f} tasks/s{lag}")
                    dbs.close()


def _throughput_rows(records: list[Record], settings: Settings) -> list[list[object]]:
    rows: list[list[object]] = []
    for kind, batch, arms in _runs(settings)[:-1]:
        base = select(records, SCENARIO, kind=kind, batch=batch, arm="shardq-async")
        for arm in arms:
            rs = select(records, SCENARIO, kind=kind, batch=batch, arm=arm)
            if rs:
                rows.append([kind if kind == "single" else f"batches of {batch:,}", LABEL[arm],
                             med(rs, "rate"), fmt_ratio(paired_ratio(base, rs, "rate")),
                             med(rs, "cpu_ms_per_1k"),
                             med(rs, "lag_max_ms") if arm != "shardq-sync" else "-"])
    return rows


def _stall_rows(records: list[Record], settings: Settings) -> list[list[object]]:
    rows: list[list[object]] = []
    for arm in _runs(settings)[-1][2]:
        rs = select(records, SCENARIO, kind="stall", arm=arm)
        if rs:
            rows.append([LABEL[arm], med(rs, "lag_max_ms"),
                         max(r["lag_max_ms"] for r in rs), med(rs, "lag_p99_ms"),
                         med(rs, "seconds") * 1000.0])
    return rows


def targets(records: list[Record], settings: Settings) -> list[list[object]]:
    """Issue 26's goals: (goal, measured, met?)."""
    batch = settings.async_batches[0]
    ratio = paired_ratio(select(records, SCENARIO, kind="batched", batch=batch,
                                arm="shardq-async"),
                         select(records, SCENARIO, kind="batched", batch=batch, arm="pgqueuer"),
                         "rate")
    stall = med(select(records, SCENARIO, kind="stall", arm="shardq-async"), "lag_max_ms")

    def verdict(ok: bool, value: float) -> str:
        return "met" if ok and not math.isnan(value) else "MISSED"

    return [[f"async batched enqueue (batches of {batch}) ≥ {BATCHED_GOAL}x PGQueuer's",
             fmt_ratio(ratio), verdict(ratio >= BATCHED_GOAL, ratio)],
            [f"largest loop stall with {settings.async_in_flight:,} enqueues and a batch of "
             f"{settings.async_stall_batch:,} in flight ≤ {STALL_GOAL_MS:g} ms",
             f"{stall:.1f} ms", verdict(stall <= STALL_GOAL_MS, stall)]]


def section(records: list[Record], settings: Settings) -> list[str]:
    """Section 9 of the report (nothing when the scenario did not run)."""
    if not select(records, SCENARIO):
        return []
    reps = len({r["rep"] for r in select(records, SCENARIO)})
    base = f" --async-base {settings.async_base}" if settings.async_base else ""
    command = f"python -m bench --scenarios async --resume --reps {reps}{base}"
    return ["## 9. Async enqueue and the event loop", "",
            f"{settings.async_callers} concurrent coroutines (threads for the blocking Client) "
            f"enqueue {settings.async_single_tasks:,} single tasks, or "
            f"{settings.async_batched_tasks:,} tasks in batches (shardq `enqueue_many` = COPY; "
            "PGQueuer list-valued `Queries.enqueue`); each client has a pool of "
            f"{POOL} connections, warmed up first. A ticker coroutine on the same "
            f"loop sleeps {TICK_S * 1000:g} ms over and over and notes how late it "
            "wakes (the loop lag any other request would feel). Ratios: shardq AsyncClient ÷ "
            f"the row, medians of per-repetition ratios. Reproduce: `{command}`.", "",
            markdown_table(["enqueue", "client", "median tasks/s", "AsyncClient ÷ it",
                            "client CPU ms / 1k tasks", "loop lag max ms"],
                           _throughput_rows(records, settings)), "",
            f"Stall: {settings.async_in_flight:,} single enqueues and one `enqueue_many` of "
            f"{settings.async_stall_batch:,} started at once (all but {POOL} wait for a "
            "connection), the ticker running; median over "
            "repetitions of each run's largest and 99th-percentile lag. The last row is the "
            "same burst of coroutines with no database at all: what starting that many "
            "costs the loop by itself.", "",
            markdown_table(["client", "lag max ms (median)", "lag max ms (worst)",
                            "lag p99 ms", "burst wall ms"], _stall_rows(records, settings)), "",
            "Goals:", "",
            markdown_table(["goal", "measured", ""], targets(records, settings)), ""]
