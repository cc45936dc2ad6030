"""Scenarios 1 and 2: enqueue (single-row and batched) and drain, every system side by side.

Per repetition, every variant gets a fresh database on the scenario's server, in
an order that rotates from one repetition to the next.  A drain run first enqueues
its tasks with the system's batch API (that is the batched-enqueue measurement),
then starts the consumer and times it until the last task has started; the
consumer's CPU and peak RSS, and the database's transactions and WAL bytes, are
taken around each of the two steps (scenario 6's per-task costs).
"""

from __future__ import annotations

from typing import Any

from bench import harness
from bench.suite import ceiling
from bench.suite.settings import DRAIN_VARIANTS, Settings, Variant

Record = dict[str, Any]


def _rotated(items: tuple[Variant, ...], rep: int) -> list[Variant]:
    k = rep % len(items)
    return list(items[k:] + items[:k])


def _enqueue_single(dbs: Any, variant: Variant, n: int) -> Record:
    if variant.system == "ceiling":
        url = harness.prepare(dbs, "ceiling")
        result = ceiling.enqueue(url, n, 1)
        return {"rate": result["rate"]}
    url = harness.prepare(dbs, variant.system)
    out = harness.call({"system": variant.system, "mode": "enqueue", "url": url, "n": n,
                        "batch": 1})
    return {"rate": out["tasks"] / out["seconds"]}


def _drain(dbs: Any, variant: Variant, settings: Settings) -> Record:
    n = max(100, int(settings.drain * variant.scale))
    if variant.system == "ceiling":
        url = harness.prepare(dbs, "ceiling")
        enq = ceiling.enqueue(url, n, settings.enqueue_batch)
        result = ceiling.drain(url, 16, variant.consume["batch"], variant.consume["clients"], n)
        return {"tasks": result["tasks"], "rate": result["rate"], "enqueue_rate": enq["rate"]}
    url = harness.prepare(dbs, variant.system)
    before = harness.counters(url)
    enq = harness.call({"system": variant.system, "mode": "enqueue", "url": url, "n": n,
                        "batch": settings.enqueue_batch})
    enq_xacts, enq_wal = harness.counter_delta(url, before)
    before = harness.counters(url)
    out = harness.call({"system": variant.system, "mode": "consume", "url": url, "n": n,
                        "deadline_s": 60 + n / 100, **variant.consume})
    xacts, wal = harness.counter_delta(url, before)
    handled = out["handled"]
    return {
        "tasks": handled, "rate": handled / out["elapsed_s"] if out["elapsed_s"] else 0.0,
        "enqueue_rate": enq["tasks"] / enq["seconds"],
        "enqueue_xacts_per_task": enq_xacts / n, "enqueue_wal_per_task": enq_wal / n,
        "xacts_per_task": xacts / handled if handled else 0.0,
        "wal_per_task": wal / handled if handled else 0.0,
        "cpu_ms_per_1k": out["cpu_s"] * 1000.0 / handled * 1000.0 if handled else 0.0,
        "peak_rss_mb": out["peak_rss"] / 2**20,
    }


def run(settings: Settings, dsn: str | None, records: list[Record], machine: list[str]) -> None:
    """Run the enqueue and drain scenarios (whichever ``settings.scenarios`` names)."""
    want_enqueue = "enqueue" in settings.scenarios
    want_drain = "drain" in settings.scenarios or want_enqueue
    with harness.fresh_server(dsn) as (admin, description, dbs):
        if not machine:
            machine += harness.machine_lines(admin, description)
        for rep in range(settings.reps):
            order = _rotated(DRAIN_VARIANTS, rep)
            if want_enqueue:
                for v in order:
                    if v.name in ("shardq-defaults", "shardq-2proc", "pgqueuer-b100"):
                        continue  # same enqueue path as shardq / pgqueuer-b10
                    out = _enqueue_single(dbs, v, settings.enqueue_single)
                    records.append({"scenario": "enqueue_single", "variant": v.name, "rep": rep,
                                    **out})
                    harness.log(f"enqueue single rep {rep + 1} {v.name}: {out['rate']:,.0f}/s")
                    dbs.close()
            if want_drain:
                for v in order:
                    out = _drain(dbs, v, settings)
                    records.append({"scenario": "drain", "variant": v.name, "rep": rep, **out})
                    harness.log(f"drain rep {rep + 1} {v.name}: {out['rate']:,.0f} tasks/s "
                                f"(enqueue batched {out['enqueue_rate']:,.0f}/s)")
                    dbs.close()
