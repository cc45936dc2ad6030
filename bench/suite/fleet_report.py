"""Report sections and plots of scenarios 7 and 8 (:mod:`bench.suite.fleet`)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.harness import markdown_table
from bench.plotting import plt, save
from bench.suite.settings import Settings
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]


def _present(records: list[Record], scenario: str, key: str, wanted: tuple[int, ...]
             ) -> list[int]:
    """The values of ``key`` among the records, in the settings' order, then any others
    (a report re-rendered from results made with other settings keeps them)."""
    seen = {int(r[key]) for r in select(records, scenario)}
    return [v for v in wanted if v in seen] + sorted(seen - set(wanted))


def _waits(rs: list[Record], top: int = 4) -> str:
    """The most frequent wait states over ``rs`` (mean share of active-backend samples)."""
    total: dict[str, float] = defaultdict(float)
    for r in rs:
        for event, share in r.get("waits", {}).items():
            total[event] += share / len(rs)
    ranked = sorted(total.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{event} {share:.0%}" for event, share in ranked)


def ceiling_section(records: list[Record], settings: Settings) -> list[str]:
    """Section 7: pgbench claim+ack tasks/s per bucket count and client count."""
    if not select(records, "fleet_ceiling"):
        return []
    buckets = _present(records, "fleet_ceiling", "buckets", settings.fleet_buckets)
    clients = _present(records, "fleet_ceiling", "clients", settings.fleet_clients)

    def rs(b: int, c: int) -> list[Record]:
        return select(records, "fleet_ceiling", buckets=b, clients=c)

    rows = [[b, *(med(rs(b, c), "rate") for c in clients),
             *(fmt_ratio(paired_ratio(rs(b, c), rs(buckets[0], c), "rate")) for c in clients)]
            for b in buckets]
    diag = [[b, c, med(rs(b, c), "rate"), med(rs(b, c), "active"),
             med(rs(b, c), "idx_tup_per_task"), med(rs(b, c), "idx_pages_per_task"),
             _waits(rs(b, c))] for c in clients for b in buckets]
    return ["## 7. Fleet ceiling: claim + ack from many connections, by bucket count", "",
            "pgbench (`-M prepared`, one thread per core) runs shardq's claim (limit 100, "
            "random bucket) + `ack_many` statements from each client connection, as a fleet "
            "of claimers would, with no Python in the loop. Each run tops the queue up to "
            f"{settings.fleet_tasks:,} tasks and stops at 80% of it; within a repetition each "
            "client count runs every bucket count back to back (rotating order). Ratios: "
            f"÷ {buckets[0]} bucket, median of per-repetition ratios.", "",
            markdown_table(["buckets", *(f"{c} clients tasks/s" for c in clients),
                            *(f"{c} clients ÷ {buckets[0]} bucket" for c in clients)], rows), "",
            "What the server did meanwhile: active backends of the bench database per sample "
            "(`pg_stat_activity` every 20 ms), index entries read and index pages touched "
            "per task (`pg_stat_user_indexes`, `pg_statio_user_tables` of `shardq.tasks`; "
            "the ack reads one entry per task), and the most frequent wait states of the "
            "active backends (CPU: not waiting).", "",
            markdown_table(["buckets", "clients", "tasks/s", "active backends",
                            "index entries/task", "index pages/task", "wait states"], diag), ""]


def worker_section(records: list[Record], settings: Settings) -> list[str]:
    """Section 8: ``shardq consume --processes N`` tasks/s per bucket count."""
    if not select(records, "fleet_worker"):
        return []
    buckets = _present(records, "fleet_worker", "buckets", settings.worker_buckets)
    procs = _present(records, "fleet_worker", "processes", settings.worker_processes)

    def rs(b: int, p: int) -> list[Record]:
        return select(records, "fleet_worker", buckets=b, processes=p)

    rows = [[p, *(med(rs(b, p), "rate") for b in buckets),
             *(fmt_ratio(paired_ratio(rs(b, p), rs(buckets[0], p), "rate")) for b in buckets[1:]),
             *(fmt_ratio(paired_ratio(rs(b, p), rs(b, procs[0]), "rate")) for b in buckets)]
            for p in procs]
    return ["## 8. Worker processes: `shardq consume --processes N`, by bucket count", "",
            "The worker as users run it (defaults: batch 100, 2 claimers and 8 handler threads "
            "per process, no-op handler), started while the queue is paused and timed from "
            f"its resume until the {settings.worker_tasks:,} waiting tasks are gone (acked). "
            "Ratios are medians of per-repetition ratios.", "",
            markdown_table(["processes", *(f"{b} buckets tasks/s" for b in buckets),
                            *(f"{b} ÷ {buckets[0]} bucket" for b in buckets[1:]),
                            *(f"{b} buckets: ÷ {procs[0]} process{'es' if procs[0] > 1 else ''}"
                              for b in buckets)], rows), ""]


def draw(records: list[Record], settings: Settings, out: Path) -> list[Path]:
    """The fleet plots that have data, written into ``out``."""
    paths: list[Path] = []
    if select(records, "fleet_ceiling"):
        buckets = _present(records, "fleet_ceiling", "buckets", settings.fleet_buckets)
        clients = _present(records, "fleet_ceiling", "clients", settings.fleet_clients)
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        for b in buckets:
            rates = [med(select(records, "fleet_ceiling", buckets=b, clients=c), "rate")
                     for c in clients]
            ratios = [paired_ratio(select(records, "fleet_ceiling", buckets=b, clients=c),
                                   select(records, "fleet_ceiling", buckets=buckets[0],
                                          clients=c), "rate") for c in clients]
            left.plot(clients, rates, marker="o", label=f"{b} buckets")
            right.plot(clients, ratios, marker="o", label=f"{b} buckets")
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xticks(clients, [str(c) for c in clients])
            ax.set_xlabel("pgbench client connections")
            ax.legend()
        left.set_ylabel("tasks/s")
        left.set_title("Claim + ack ceiling (pgbench)")
        right.set_ylabel(f"÷ {buckets[0]} bucket (side by side)")
        right.set_title("Buckets' gain")
        paths.append(save(fig, out / "fleet_ceiling.png"))
    if select(records, "fleet_worker"):
        buckets = _present(records, "fleet_worker", "buckets", settings.worker_buckets)
        procs = _present(records, "fleet_worker", "processes", settings.worker_processes)
        fig, ax = plt.subplots(figsize=(7, 4))
        for b in buckets:
            ax.plot(procs, [med(select(records, "fleet_worker", buckets=b, processes=p), "rate")
                            for p in procs], marker="o", label=f"{b} buckets")
        ax.set_xscale("log", base=2)
        ax.set_xticks(procs, [str(p) for p in procs])
        ax.set_xlabel("worker processes (`shardq consume --processes N`)")
        ax.set_ylabel("tasks/s")
        ax.set_title("shardq worker processes: drain rate")
        ax.legend()
        paths.append(save(fig, out / "fleet_workers.png"))
    return paths
