"""Scenario 3 (pickup latency, idle and loaded) and scenario 6's churn (bloat after a period);
their runs also serve the fixed-rate scenario (:mod:`bench.suite.rate`).

A consumer process starts and says READY; then a producer process enqueues single
tasks at a fixed rate, each carrying its send time; the consumer's handler notes
``now - t`` when it starts (enqueue → handler start, both processes on one clock).
The consumer's first second of tasks is dropped as warm-up.  The consumer's and the
server's CPU time are read before and after the producer ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from bench import harness
from bench.suite.cpu import load_1m, process_cpu_s, server_cpu_s
from bench.suite.settings import COST_VARIANTS, PICKUP_VARIANTS, Settings, Variant
from bench.suite.stats import fmt_ratio, med, paired_ratio, rotated, select

Record = dict[str, Any]
IDLE_BEFORE_S = 1.0  # the consumer connects and goes idle (LISTEN) before the first task


def run_pair(url: str, variant: Variant, rate: float, seconds: float) -> Record:
    """Producer at ``rate``/s for ``seconds`` against a running consumer; latencies and costs."""
    expected = max(1, int(rate * seconds))
    before = harness.counters(url)
    consumer = harness.spawn({"system": variant.system, "mode": "consume", "url": url,
                              "n": expected, "deadline_s": 3 * seconds + 30,
                              **variant.consume})
    harness.wait_ready(consumer)
    time.sleep(IDLE_BEFORE_S)
    worker_cpu, pg_cpu = process_cpu_s(consumer.pid), server_cpu_s(url)
    producer = harness.call({"system": variant.system, "mode": "produce", "url": url,
                             "rate": rate, "seconds": seconds}, timeout=seconds + 120)
    pg_cpu = server_cpu_s(url) - pg_cpu
    out = harness.finish(consumer, timeout=60)
    # (the consumer may have exited: its CPU when it handled the last task, from itself)
    worker_cpu = out["cpu_total_at_target_s"] - worker_cpu
    xacts, wal = harness.counter_delta(url, before)
    lat = out["latencies_ms"]
    skip = min(len(lat) // 10, int(rate))  # warm-up: first second (at most a tenth)
    kept = lat[skip:]
    handled = max(1, out["handled"])
    return {
        "rate": rate, "sent": producer["sent"], "handled": out["handled"],
        "achieved_rate": producer["sent"] / producer["seconds"],
        "p50_ms": harness.percentile(kept, 50), "p95_ms": harness.percentile(kept, 95),
        "p99_ms": harness.percentile(kept, 99), "max_ms": max(kept) if kept else float("nan"),
        "cpu_ms_per_1k": out["cpu_s"] * 1e6 / handled, "peak_rss_mb": out["peak_rss"] / 2**20,
        "xacts_per_task": xacts / handled, "wal_per_task": wal / handled,
        # over the sending time: the producer's start-up counts in the costs, not the time
        "worker_cpu_pct": 100 * worker_cpu / producer["seconds"],
        "pg_cpu_pct": 100 * pg_cpu / producer["seconds"],
    }


def _loaded_rate(settings: Settings, variant: Variant, records: list[Record]) -> float:
    """The loaded rate, capped at half of what the system drained (below capacity)."""
    rates = [r["rate"] for r in records
             if r["scenario"] == "drain" and r["variant"] == variant.name]
    if rates:
        return min(settings.loaded_rate, round(0.5 * harness.median(rates), -1) or 10.0)
    return settings.loaded_rate if variant.system != "procrastinate" else settings.loaded_rate / 5


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Idle and loaded pickup latency for each system's defaults."""
    run_loads(settings, dsn, records, "pickup", PICKUP_VARIANTS, settings.pickup_s,
              [("idle", lambda v: settings.idle_rate),
               ("loaded", lambda v: _loaded_rate(settings, v, records))])


def run_loads(settings: Settings, dsn: str | None, records: list[Record], scenario: str,
              variants: Sequence[Variant], seconds: float,
              loads: Sequence[tuple[str, Callable[[Variant], float]]]) -> None:
    """A :func:`run_pair` of ``seconds`` for each load (its name, and the rate it sets a
    variant) and variant, repetitions rotating the variants' order.

    Every run gets a fresh database, so no task of an earlier run is picked up.
    """
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        for rep in range(settings.reps):
            for load, rate_of in loads:
                for v in rotated(variants, rep):
                    rate = rate_of(v)
                    url = harness.prepare(dbs, v.system)  # fresh: nothing left from before
                    before = load_1m()
                    out = run_pair(url, v, rate, seconds)
                    dbs.close()
                    records.append({"scenario": scenario, "load": load, "variant": v.name,
                                    "rep": rep, "load_1m_before": before, **out})
                    harness.log(f"{scenario} {load} rep {rep + 1} {v.name} @{rate:g}/s: "
                                f"p50 {out['p50_ms']:.1f} p99 {out['p99_ms']:.1f} ms "
                                f"({out['handled']}/{out['sent']})")


def latency_rows(records: list[Record], scenario: str, loads: Sequence[str],
                 variants: Sequence[Variant], costs: Sequence[str]) -> list[list[object]]:
    """Per load and variant: set and achieved rate, p50/p95/p99 ms, the first variant's
    p99 ÷ its, handled/sent, then the medians of ``costs`` (record keys)."""
    rows: list[list[object]] = []
    for load in loads:
        base = select(records, scenario, load=load, variant=variants[0].name)
        for v in variants:
            rs = select(records, scenario, load=load, variant=v.name)
            if not rs:
                continue
            rows.append([load, v.name, med(rs, "rate"), med(rs, "achieved_rate"),
                         med(rs, "p50_ms"), med(rs, "p95_ms"), med(rs, "p99_ms"),
                         fmt_ratio(paired_ratio(base, rs, "p99_ms")),
                         f"{sum(r['handled'] for r in rs)}/{sum(r['sent'] for r in rs)}",
                         *(med(rs, key) for key in costs)])
    return rows


def run_churn(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Scenario 6's churn: each system alone for ``churn_s`` at ``churn_rate``, then sizes."""
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        for v in COST_VARIANTS:
            url = harness.prepare(dbs, v.system)
            out = run_pair(url, v, settings.churn_rate, settings.churn_s)
            sizes = harness.table_stats(url)
            main = sizes["tables"][0] if sizes["tables"] else {}
            records.append({"scenario": "churn", "variant": v.name, "rep": 0, **out,
                            "table_bytes": sizes["table_bytes"],
                            "index_bytes": sizes["index_bytes"],
                            "dead": sizes["dead"], "live": sizes["live"],
                            "main_table": main.get("table", ""), "tables": sizes["tables"]})
            harness.log(f"churn {v.name} {settings.churn_s:g}s: tables "
                        f"{sizes['table_bytes'] / 2**20:.1f} MiB, indexes "
                        f"{sizes['index_bytes'] / 2**20:.1f} MiB, dead {sizes['dead']}")
            dbs.close()
