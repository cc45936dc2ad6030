"""Scenario 3 (pickup latency, idle and loaded) and scenario 6's churn (bloat after a period).

A consumer process starts and says READY; then a producer process enqueues single
tasks at a fixed rate, each carrying its send time; the consumer's handler notes
``now - t`` when it starts (enqueue → handler start, both processes on one clock).
The consumer's first second of tasks is dropped as warm-up.
"""

from __future__ import annotations

import time
from typing import Any

from bench import harness
from bench.suite.settings import COST_VARIANTS, PICKUP_VARIANTS, Settings, Variant

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
    producer = harness.call({"system": variant.system, "mode": "produce", "url": url,
                             "rate": rate, "seconds": seconds}, timeout=seconds + 120)
    out = harness.finish(consumer, timeout=60)
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
    }


def _loaded_rate(settings: Settings, variant: Variant, records: list[Record]) -> float:
    """The loaded rate, capped at half of what the system drained (below capacity)."""
    rates = [r["rate"] for r in records
             if r["scenario"] == "drain" and r["variant"] == variant.name]
    if rates:
        return min(settings.loaded_rate, round(0.5 * harness.median(rates), -1) or 10.0)
    return settings.loaded_rate if variant.system != "procrastinate" else settings.loaded_rate / 5


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Idle and loaded pickup latency for each system, repetitions alternating systems.

    Every run gets a fresh database, so no task of an earlier run is picked up.
    """
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        for rep in range(settings.reps):
            k = rep % len(PICKUP_VARIANTS)
            order = PICKUP_VARIANTS[k:] + PICKUP_VARIANTS[:k]
            for load, base_rate in (("idle", settings.idle_rate), ("loaded", None)):
                for v in order:
                    rate = base_rate or _loaded_rate(settings, v, records)
                    url = harness.prepare(dbs, v.system)  # fresh: nothing left from before
                    out = run_pair(url, v, rate, settings.pickup_s)
                    dbs.close()
                    records.append({"scenario": "pickup", "load": load, "variant": v.name,
                                    "rep": rep, **out})
                    harness.log(f"pickup {load} rep {rep + 1} {v.name} @{rate:g}/s: "
                                f"p50 {out['p50_ms']:.1f} p99 {out['p99_ms']:.1f} ms "
                                f"({out['handled']}/{out['sent']})")


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
