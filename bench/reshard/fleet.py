"""Goal 2: claim + ack from many connections on a schema resharded 16 → 64, beside a
schema created with 64 buckets (``shardq migrate --bucket-count 64``).

The suite's fleet ceiling (:mod:`bench.suite.fleet`): pgbench sends shardq's own claim
(limit 100) and ack statements from C connections, topped up to the same backlog before
every run and stopped at 80 % of it, while :class:`bench.suite.fleet.WaitSampler` reads
what the backends wait on.  The statements are composed for the layout each database
has (``shardq.layout``: the stored column, or the bucket expression a reshard leaves)
and its generation, as a client composes them.  The two databases take turns, in an
order that swaps every repetition.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg

import shardq
from bench import harness
from bench.reshard import common
from bench.suite import backlog, ceiling, fleet
from shardq.core.dialect import POSTGRESQL

QUEUE = harness.QUEUE
GOAL = 0.9
ARMS = ("native", "resharded")


def claim_ack_script(url: str) -> str:
    """The suite's pgbench claim + ack script for the layout of ``url``."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT bucket_count, expression, generation "
                           "FROM shardq.layout").fetchone()
    assert row is not None
    count, expression, generation = int(row[0]), bool(row[1]), int(row[2])
    return ceiling.claim_ack_script(count, fleet.LIMIT,
                                    POSTGRESQL.layout_bucket(count, expression), generation)


def run(url: str, clients: int, tasks: int) -> dict[str, Any]:
    """One pgbench claim+ack run on ``url``: its rate, waits and index entries per task."""
    backlog.top_up(url, tasks)
    time.sleep(harness.SETTLE_S)  # the fill's statistics, flushed before the baseline
    script = claim_ack_script(url)
    load, before = common.load_1m(), backlog.waiting(url)
    tuples0, _pages0 = fleet.index_counters(url)
    with fleet.WaitSampler(url) as sampler:
        seconds, _ = ceiling.pgbench(
            url, script, clients, int(0.8 * tasks / (fleet.LIMIT * clients)),
            {"queue": QUEUE, "lease_s": 30},
            min(clients, os.cpu_count() or 1))
    done = before - backlog.waiting(url)
    time.sleep(harness.SETTLE_S)  # pgbench's backends flush their statistics as they exit
    tuples1, _pages1 = fleet.index_counters(url)
    return {"rate": done / seconds if seconds else 0.0, "load": load,
            "wait": next(iter(sampler.shares()), "-"),
            "entries": (tuples1 - tuples0) / max(1, done)}


def measure(admin: str, clients: int, tasks: int, reps: int
            ) -> tuple[list[dict[str, dict[str, Any]]], common.Timeline]:
    """``reps`` runs of each database, taking turns; and the reshard of the resharded one."""
    with harness.Databases(admin, "sq_reshard") as dbs:
        urls = {"native": dbs.migrated(common.TO), "resharded": dbs.migrated(common.FROM)}
        for url in urls.values():
            backlog.top_up(url, tasks)
        timeline = common.Timeline(urls["resharded"])
        with shardq.Client(urls["resharded"], pool_max_size=2) as client:
            client.reshard(common.TO, on_step=timeline)
        timeline.close()
        runs: list[dict[str, dict[str, Any]]] = []
        for rep in range(reps):
            runs.append({})
            for name in ARMS if rep % 2 == 0 else ARMS[::-1]:
                runs[-1][name] = out = run(urls[name], clients, tasks)
                harness.log(f"fleet rep {rep + 1} {name}: {out['rate']:,.0f} tasks/s")
    return runs, timeline


def section(runs: list[dict[str, dict[str, Any]]], timeline: common.Timeline, clients: int,
            tasks: int) -> tuple[list[str], list[list[object]]]:
    """The report's section: each repetition's rates and ratio, and the goal."""
    ratios = [r["resharded"]["rate"] / r["native"]["rate"] for r in runs]
    rows = [[i + 1, " then ".join(ARMS if i % 2 == 0 else ARMS[::-1]),
             f"{r['native']['load']:.2f} / {r['resharded']['load']:.2f}",
             r["native"]["rate"], r["resharded"]["rate"], f"{ratio:.2f}x",
             f"{r['native']['entries']:.1f} / {r['resharded']['entries']:.1f}",
             f"{r['native']['wait']} / {r['resharded']['wait']}"]
            for i, (r, ratio) in enumerate(zip(runs, ratios, strict=True))]
    native = harness.median([r["native"]["rate"] for r in runs])
    resharded = harness.median([r["resharded"]["rate"] for r in runs])
    ratio = harness.median(ratios)
    goals: list[list[object]] = [[
        "2. claims after a reshard", f"tasks/s from {clients} connections, resharded ÷ "
        f"native (median of per-rep ratios; medians {resharded:,.0f} / {native:,.0f})",
        f"{ratio:.2f}x", f"≥ {GOAL}x", common.verdict(ratio, GOAL, True)]]
    return [f"## 2. Claim + ack after `reshard {common.FROM} → {common.TO}`", "",
            f"pgbench runs shardq's claim (limit {fleet.LIMIT}) and ack from {clients} "
            f"connections on a schema resharded {common.FROM} → {common.TO} (its backlog in "
            f"place during the reshard) and on one created with {common.TO} buckets; both "
            f"topped up to {tasks:,} waiting tasks before every run, each run stopped at 80 % "
            "of them. Index entries read per task and the most common wait of the active "
            "backends come from the suite's fleet ceiling.", "",
            harness.markdown_table(
                ["rep", "order", "load at start (native / resharded)", "native tasks/s",
                 "resharded tasks/s", "ratio", "index entries per task", "most common wait"],
                rows), "",
            common.goal_table(goals), "",
            *timeline.lines(f"Its reshard (idle, {tasks:,} tasks)")], goals
