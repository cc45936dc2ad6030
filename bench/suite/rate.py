"""Scenario 17: pickup latency and cost at a fixed rate, and idle.

A producer process enqueues single jobs at ``fixed_rate`` per second (and, the idle
case, at ``idle_rate``) into an empty queue, each carrying its send time; one consumer
process (:data:`bench.suite.settings.RATE_VARIANTS`: each system's defaults with 16
handler slots, a no-op handler) notes enqueue → handler start.  The runs are the pickup
scenario's (:func:`bench.suite.pickup.run_pair`): what differs is the consumers, the
rate (not capped by an earlier drain) and what the report shows, the consumer's and
PostgreSQL's CPU as a share of one core.
"""

from __future__ import annotations

from typing import Any

from bench.harness import markdown_table
from bench.suite import pickup
from bench.suite.settings import RATE_VARIANTS, SHARDQ_ARMS, Settings
from bench.suite.stats import med, select

Record = dict[str, Any]
SCENARIO = "rate"
GOAL_P99_MS = 10.0
GOAL_CPU_PCT = 15.0  # of one core, the consumer and PostgreSQL each


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Idle and fixed-rate runs of every variant, repetitions rotating the variants."""
    pickup.run_loads(settings, dsn, records, SCENARIO, RATE_VARIANTS, settings.rate_s,
                     [("idle", lambda v: settings.idle_rate),
                      ("fixed", lambda v: settings.fixed_rate)])


def targets(records: list[Record], settings: Settings) -> list[list[object]]:
    """The fixed-rate goals for each shardq arm: (goal, measured, met?)."""
    out: list[list[object]] = []
    for sq in SHARDQ_ARMS:
        fixed = select(records, SCENARIO, load="fixed", variant=sq)
        idle = select(records, SCENARIO, load="idle", variant=sq)
        if not fixed and not idle:
            continue
        at = f"{med(fixed, 'rate'):g}/s"
        for goal, rs, key, unit, below in (
                (f"rate {at}, {sq}: pickup p99 ≤ {GOAL_P99_MS:g} ms", fixed, "p99_ms", "ms",
                 False),
                (f"rate {at}, {sq}: consumer CPU ≤ {GOAL_CPU_PCT:g} % of a core", fixed,
                 "worker_cpu_pct", "%", False),
                (f"rate {at}, {sq}: PostgreSQL CPU ≤ {GOAL_CPU_PCT:g} % of a core", fixed,
                 "pg_cpu_pct", "%", False),
                (f"idle ({med(idle, 'rate'):g}/s), {sq}: pickup p99 < {GOAL_P99_MS:g} ms", idle,
                 "p99_ms", "ms", True)):
            value = med(rs, key)
            limit = GOAL_P99_MS if key == "p99_ms" else GOAL_CPU_PCT
            met = value < limit if below else value <= limit
            out.append([goal, f"{value:.1f} {unit}", "met" if met else "MISSED"])
    return out


def section(records: list[Record], settings: Settings) -> list[str]:
    """Section 17 of the report (nothing when the scenario did not run)."""
    rs = select(records, SCENARIO)
    if not rs:
        return []
    rows = pickup.latency_rows(records, SCENARIO, ("idle", "fixed"), RATE_VARIANTS,
                               ("worker_cpu_pct", "pg_cpu_pct", "xacts_per_task"))
    reps = len({r["rep"] for r in rs})
    notes = "; ".join(f"{v.name}: {v.note}" for v in RATE_VARIANTS)
    return ["## 17. Latency and cost at a fixed rate", "",
            f"A producer process enqueues single jobs (one call and transaction each) at "
            f"{settings.fixed_rate:g} jobs/s ('fixed') and at {settings.idle_rate:g} jobs/s "
            f"('idle') for {settings.rate_s:g} s into an empty queue, each carrying its send "
            "time; one consumer process (each system's defaults with 16 handler slots and a "
            f"no-op handler: {notes}) notes handler start - send time. The first second is "
            "warm-up. CPU (psutil, user + system) from before the producer starts to after "
            "it ends, ÷ its sending time: the consumer process, and PostgreSQL (the "
            "postmaster and every backend, the producer's inserts included: the same work "
            f"for every system). Medians over {reps} repetition(s), each run on its own "
            "database, the systems' order rotating per repetition; the p99 ratio is the "
            "median of per-repetition ratios (lower is better for shardq).", "",
            markdown_table(["load", "system", "set jobs/s", "achieved jobs/s", "p50 ms",
                            "p95 ms", "p99 ms", f"{RATE_VARIANTS[0].name} p99 ÷ it",
                            "handled/sent", "consumer CPU % of a core",
                            "PostgreSQL CPU % of a core", "db xacts/job"], rows), "",
            "Goals:", "", markdown_table(["goal", "measured", ""], targets(records, settings)),
            ""]
