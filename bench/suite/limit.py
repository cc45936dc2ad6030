"""Scenario 11: the drain against the database's limit, and what a claimed task costs it.

Two parts, on one fresh PostgreSQL, each repetition alternating its arms:

- Drain ÷ ceiling: the suite's in-process shardq drain (the worker of section 2) and
  the pgbench ceiling (shardq's own claim and ack, :mod:`bench.suite.ceiling`, the
  same 4 clients as section 2) on the same backlog of ``limit_tasks``, filled
  server-side.  Around each, the database's cost per task: WAL bytes, WAL records
  by kind (``pg_walinspect``: heap row versions, locks and deletes, b-tree index
  entries), and the tasks table's row updates, HOT updates and deletes.
- Candidates: the ceiling's claim + ack on today's schema and on changed ones
  (:data:`CANDIDATES`), each in a database of its own, the same measurements.  A
  candidate pays if it lowers the cost per task and raises the ceiling's rate.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench import harness
from bench.harness import markdown_table
from bench.suite import backlog, ceiling
from bench.suite.settings import CEILING, SHARDQ, Settings
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]
BUCKETS = 16
# WAL record kinds reported per task (pg_walinspect's resource_manager/record_type).
KINDS = ("Heap/LOCK", "Heap/UPDATE", "Heap/HOT_UPDATE", "Heap/DELETE", "Btree/INSERT_LEAF")


@dataclass(frozen=True)
class Candidate:
    """A change to the schema (``ddl``) or to the ceiling's script (``edit``)."""

    name: str
    note: str
    ddl: tuple[str, ...] = ()
    edit: Callable[[str], str] = field(default=lambda script: script)


def _no_row_lock(script: str) -> str:
    return script.replace("FOR UPDATE SKIP LOCKED", "")


CANDIDATES = (
    Candidate("today", "the schema and statements as they are"),
    Candidate("fillfactor 100", "no room left on heap pages (today: 90)",
              ("ALTER TABLE shardq.tasks SET (fillfactor = 100)",)),
    Candidate("fillfactor 50", "half of each heap page left for new row versions",
              ("ALTER TABLE shardq.tasks SET (fillfactor = 50)",)),
    Candidate("no tasks_leases", "a claim writes 2 index entries, not 3 (the janitor's "
              "lease index dropped)", ("DROP INDEX shardq.tasks_leases",)),
    Candidate("no row lock", "the claim without FOR UPDATE SKIP LOCKED (unsafe: concurrent "
              "claims wait on each other; measures the lock's own cost)", edit=_no_row_lock),
)


@dataclass
class Snapshot:
    """The server's WAL position and the tasks table's write counters at one moment."""

    lsn: str
    updated: int
    hot: int
    deleted: int


def snapshot(url: str) -> Snapshot:
    """Read the WAL position and ``shardq.tasks``' counters (stats flushed first)."""
    time.sleep(harness.SETTLE_S)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT pg_current_wal_lsn()::text, n_tup_upd, n_tup_hot_upd, n_tup_del "
            "FROM pg_stat_user_tables WHERE relid = 'shardq.tasks'::regclass").fetchone()
    assert row is not None
    return Snapshot(str(row[0]), int(row[1]), int(row[2]), int(row[3]))


def costs(url: str, before: Snapshot) -> Record:
    """What the tasks deleted since ``before`` cost the database, per task."""
    after = snapshot(url)
    done = max(1, after.deleted - before.deleted)
    out: Record = {"done": done, "updates_per_task": (after.updated - before.updated) / done,
                   "hot_per_task": (after.hot - before.hot) / done}
    with psycopg.connect(url, autocommit=True) as conn:
        out["wal_per_task"] = float(harness.scalar(
            conn, "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)",
            (after.lsn, before.lsn))) / done
        try:
            rows = conn.execute(
                'SELECT "resource_manager/record_type", count, fpi_size '
                "FROM pg_get_wal_stats(%s::pg_lsn, %s::pg_lsn, true)",
                (before.lsn, after.lsn)).fetchall()
        except psycopg.Error:  # no pg_walinspect on this server
            return out
    counts = {str(kind): int(n) for kind, n, _ in rows}
    out["records"] = {kind: counts.get(kind, 0) / done for kind in KINDS}
    out["fpi_per_task"] = sum(int(fpi) for _, _, fpi in rows) / done
    return out


def _database(dbs: harness.Databases, ddl: tuple[str, ...] = ()) -> str:
    url = dbs.migrated(BUCKETS)
    with psycopg.connect(url, autocommit=True) as conn:
        with contextlib.suppress(psycopg.Error):  # without it the WAL records are left out
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        for statement in ddl:
            conn.execute(statement)
    return url


def _drain(url: str, n: int) -> Record:
    backlog.top_up(url, n)
    before = snapshot(url)
    # Through 80% of the backlog, as the ceiling: neither sees the tail of a draining queue.
    out = harness.call({"system": "shardq", "mode": "consume", "url": url, "n": int(0.8 * n),
                        "deadline_s": 60 + n / 100, **SHARDQ.consume})
    rate = out["handled"] / out["elapsed_s"] if out["elapsed_s"] else 0.0
    return {"rate": rate, **costs(url, before)}


def _ceiling(url: str, n: int, edit: Callable[[str], str] = CANDIDATES[0].edit) -> Record:
    backlog.top_up(url, n)
    before = snapshot(url)
    limit, clients = CEILING.consume["batch"], CEILING.consume["clients"]
    script = edit(ceiling.claim_ack_script(BUCKETS, limit))
    seconds, _ = ceiling.pgbench(url, script, clients, int(0.8 * n / (limit * clients)),
                                 {"queue": ceiling.QUEUE, "lease_s": 30})
    out = costs(url, before)
    return {"rate": out["done"] / seconds if seconds else 0.0, **out}


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Drain ÷ ceiling side by side, then the candidates' claim + ack side by side."""
    n = settings.limit_tasks
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        drain_url, ceiling_url = _database(dbs), _database(dbs)
        urls = {c.name: _database(dbs, c.ddl) for c in CANDIDATES}
        arms: list[tuple[str, Callable[[], Record]]] = [
            ("shardq", lambda: _drain(drain_url, n)),
            ("ceiling", lambda: _ceiling(ceiling_url, n))]
        for rep in range(settings.reps):
            for arm, measure in arms[rep % 2:] + arms[:rep % 2]:
                out = measure()
                records.append({"scenario": "limit", "arm": arm, "rep": rep, **out})
                harness.log(f"limit rep {rep + 1} {arm}: {out['rate']:,.0f} tasks/s, "
                            f"{out['wal_per_task']:.0f} WAL B/task")
            k = rep % len(CANDIDATES)
            for c in CANDIDATES[k:] + CANDIDATES[:k]:
                out = _ceiling(urls[c.name], n, c.edit)
                records.append({"scenario": "limit_candidate", "candidate": c.name, "rep": rep,
                                **out})
                harness.log(f"limit rep {rep + 1} candidate {c.name}: {out['rate']:,.0f} "
                            f"tasks/s, {out['wal_per_task']:.0f} WAL B/task")


def _per_task(rs: list[Record]) -> list[object]:
    """WAL bytes, WAL records by kind, HOT updates: medians per task."""
    kinds = [med([{"v": r["records"][k]} for r in rs if "records" in r], "v")
             for k in KINDS]
    return [med(rs, "wal_per_task"), med(rs, "fpi_per_task"), *kinds, med(rs, "hot_per_task")]


def section(records: list[Record], settings: Settings) -> list[str]:
    """The report's section: drain ÷ ceiling and the candidates, with their costs per task."""
    drain, ceiling = select(records, "limit", arm="shardq"), select(records, "limit", arm="ceiling")
    if not drain:
        return []
    cost_headers = ["WAL B/task", "of it full-page images B", "row locks", "row versions",
                    "HOT row versions", "deletes", "index entries", "HOT updates (stats)"]
    rows = [[arm, med(rs, "rate"), ", ".join(f"{r['rate']:,.0f}" for r in rs),
             fmt_ratio(paired_ratio(rs, ceiling, "rate")), *_per_task(rs)]
            for arm, rs in (("shardq drain (in-process worker)", drain),
                            ("ceiling (pgbench claim + ack)", ceiling))]
    today = select(records, "limit_candidate", candidate=CANDIDATES[0].name)
    crows = []
    for c in CANDIDATES:
        rs = select(records, "limit_candidate", candidate=c.name)
        crows.append([c.name, c.note, med(rs, "rate"),
                      ", ".join(f"{r['rate']:,.0f}" for r in rs),
                      fmt_ratio(paired_ratio(rs, today, "rate")), *_per_task(rs)])
    return ["## 11. Toward the limit: the drain ÷ the ceiling, and what a task costs the database",
            "",
            f"A backlog of {settings.limit_tasks:,} tasks (filled server-side, VACUUM ANALYZE, "
            "CHECKPOINT); the in-process worker of section 2 (batch 100, 2 claimers, 4 handler "
            "threads) and pgbench running shardq's own claim(limit 100) + ack_many from 4 clients "
            "each go through 80% of it, alternating. Per task: WAL bytes "
            "(`pg_current_wal_lsn()`), WAL records by kind (`pg_walinspect`'s "
            "`pg_get_wal_stats`: row locks `Heap/LOCK`, new row versions `Heap/UPDATE`, HOT ones "
            "`Heap/HOT_UPDATE`, deletes `Heap/DELETE`, index entries `Btree/INSERT_LEAF`) and "
            "HOT updates from `pg_stat_user_tables`. Command: "
            f"`python -m bench --scenarios limit --reps {settings.reps}`.", "",
            markdown_table(["arm", "median tasks/s", "per rep", "÷ ceiling", *cost_headers],
                           rows), "",
            "Candidates: the ceiling's claim + ack on today's schema and on changed ones, each "
            "in a database of its own, alternating.", "",
            markdown_table(["candidate", "change", "median tasks/s", "per rep", "÷ today",
                            *cost_headers], crows), ""]
