"""Lease model: move exec_time to the lease expiry (shardq) or keep it and add a lease column?

Two hand-made tables in a scratch database, with shardq.tasks' storage settings:

- A, shardq's layout: PK (bucket, queue, status, exec_time, id); a claim sets status =
  'locked' and exec_time = now() + lease, so claimed rows leave the claims' range;
- B: PK (bucket, queue, exec_time, id); a claim sets status = 'locked' and
  lease_expires_at and keeps exec_time, so claims (status = 'available') step over
  the locked rows still in their range.

Before every run the table is refilled (bucket = a random int mod 16), some tasks
are claimed and never acked (held locked), and it is VACUUM ANALYZEd; then threads
run a claim (``LIMIT n FOR UPDATE SKIP LOCKED``) + delete-ack loop, models alternating
A, B.  One claim per model also runs under ``EXPLAIN (ANALYZE, BUFFERS)``, rolled back.

    python -m bench.lease_model [--rows 200000] [--locked 10000] [--seconds 5]
        [--reps 3] [--threads 2] [--limit 100] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from bench import harness

BUCKETS = 16
HELD_LEASE_S = 3600.0
LEASE_S = 300.0
BUDGET = 0.75  # a run ends once this share of the available tasks is acked
STORAGE = """fillfactor = 90, autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000, autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 20000, autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0"""
# Same columns in both (A leaves lease_expires_at NULL); only the key and the lease
# column differ.  Each has a partial index of leases for a janitor (cf. tasks_leases).
DDL = """CREATE TABLE {t} (
    bucket smallint NOT NULL, queue text NOT NULL, status text NOT NULL DEFAULT 'available',
    exec_time timestamptz NOT NULL, id uuid NOT NULL DEFAULT gen_random_uuid(),
    lease_expires_at timestamptz, payload jsonb NOT NULL, lease_token uuid,
    PRIMARY KEY ({key})) WITH (""" + STORAGE + """);
CREATE INDEX ON {t} (bucket, {lease}) WHERE status = 'locked'"""
KEY = {"A": ["bucket", "queue", "status", "exec_time", "id"],
       "B": ["bucket", "queue", "exec_time", "id"]}
# The claims differ only in the column the lease is written to; the filter is the same,
# but in A `status` is a key column of the index range and in B a filter on the rows.
CLAIM = """WITH c AS MATERIALIZED (
    SELECT ctid FROM {t}
    WHERE bucket = %(bucket)s AND queue = %(queue)s AND status = 'available'
      AND exec_time <= now()
    ORDER BY exec_time LIMIT {limit} FOR UPDATE SKIP LOCKED)
UPDATE {t} AS t SET status = 'locked', {lease} = now() + %(lease_s)s * interval '1 second',
    lease_token = gen_random_uuid()
FROM c WHERE t.ctid = c.ctid
RETURNING t.ctid::text, t.lease_token"""
LEASE_COLUMN = {"A": "exec_time", "B": "lease_expires_at"}
# Both models ack alike: by the row version the claim returned, lease token checked.  (Not
# shardq's key-joined ack_many, whose plan scans every in-flight task: see the report.)
ACK = """DELETE FROM {t} AS t
USING unnest(%(ctids)s::text[]::tid[], %(tokens)s::uuid[]) AS a(ctid, token)
WHERE t.ctid = a.ctid AND t.status = 'locked' AND t.lease_token = a.token"""
FILL = """INSERT INTO {t} (bucket, queue, exec_time, payload)
SELECT mod((random() * 2147483646)::int, %(buckets)s), %(queue)s,
       now() - g * interval '1 millisecond', jsonb_build_object('n', g)
FROM generate_series(1, %(n)s) g"""
TABLES = {"A": "lease_a", "B": "lease_b"}
SCANS = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Seq Scan")


def q(template: str, model: str, limit: int = 0) -> sql.Composed:
    """``template`` with the model's table, lease column and LIMIT literal filled in."""
    return sql.SQL(template).format(
        t=sql.Identifier(TABLES[model]), lease=sql.Identifier(LEASE_COLUMN[model]),
        key=sql.SQL(", ").join(map(sql.Identifier, KEY[model])), limit=sql.Literal(limit))


def claim(conn: harness.Connection, model: str, bucket: int, limit: int,
          lease_s: float = LEASE_S) -> list[tuple[Any, ...]]:
    """Claim up to ``limit`` tasks of one bucket; their (ctid, lease_token)."""
    params = {"bucket": bucket, "queue": harness.QUEUE, "lease_s": lease_s}
    return conn.execute(q(CLAIM, model, limit), params).fetchall()


def ack(conn: harness.Connection, model: str, rows: list[tuple[Any, ...]]) -> None:
    """Delete claimed tasks (lease-token checked); fail if any was not there."""
    params = {"ctids": [r[0] for r in rows], "tokens": [r[1] for r in rows]}
    cur = conn.execute(q(ACK, model), params)
    if cur.rowcount != len(rows):
        raise RuntimeError(f"model {model}: acked {cur.rowcount} of {len(rows)} tasks")


def reset(url: str, model: str, rows: int, locked: int) -> None:
    """Refill the model's table, hold ``locked`` tasks claimed, VACUUM ANALYZE."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(q("TRUNCATE {t}", model))
        conn.execute(q(FILL, model), {"buckets": BUCKETS, "queue": harness.QUEUE, "n": rows})
        for bucket in range(BUCKETS):  # the same number of held tasks in every bucket
            share = locked // BUCKETS + (bucket < locked % BUCKETS)
            if share and len(claim(conn, model, bucket, share, HELD_LEASE_S)) != share:
                raise RuntimeError(f"model {model}: bucket {bucket} has under {share} tasks")
        conn.execute(q("VACUUM ANALYZE {t}", model))
    harness.checkpoint(url)


def explain(url: str, model: str, limit: int) -> dict[str, float]:
    """Rows and buffers of one claim of bucket 0 under EXPLAIN (ANALYZE, BUFFERS), rolled back."""
    with psycopg.connect(url) as conn:
        stmt = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + q(CLAIM, model, limit)
        doc = harness.scalar(conn, stmt, {"bucket": 0, "queue": harness.QUEUE, "lease_s": LEASE_S})
        conn.rollback()
    top = doc[0]
    nodes, scans = [top["Plan"]], []
    while nodes:  # the CTE's scan of the table (the UPDATE's TID scan is aliased "t")
        node = nodes.pop()
        nodes += node.get("Plans", [])
        if node["Node Type"] in SCANS and node.get("Alias") == TABLES[model]:
            scans.append(node)
    if len(scans) != 1:
        raise RuntimeError(f"model {model}: expected one scan of the table, plan: {top}")
    scan = scans[0]
    return {
        "returned": scan["Actual Rows"],
        "removed": scan.get("Rows Removed by Filter", 0),
        "scan_hit": scan["Shared Hit Blocks"] + scan["Shared Read Blocks"],
        "total_hit": top["Plan"]["Shared Hit Blocks"] + top["Plan"]["Shared Read Blocks"],
        "ms": top["Execution Time"],
    }


@dataclass
class Run:
    """One timed run of one model."""

    tasks: int = 0
    seconds: float = 0.0
    empty_claims: int = 0
    claim_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Tasks claimed and acked per second."""
        return self.tasks / self.seconds if self.seconds else 0.0


def run_once(url: str, model: str, threads: int, limit: int, seconds: float,
             budget: int) -> Run:
    """``threads`` threads (one connection each) claim + ack round-robin for ``seconds``.

    The run also ends once ``budget`` tasks are acked, so that every bucket stays
    stocked and claims return full batches; only claims that returned tasks are timed.
    """
    run, lock = Run(), threading.Lock()
    conns = [psycopg.connect(url, autocommit=True) for _ in range(threads)]

    def start(index: int) -> Callable[[], bool]:
        conn, at = conns[index], [index * BUCKETS // threads]

        def step() -> bool:
            began = time.perf_counter()
            rows = claim(conn, model, at[0], limit)
            ms = (time.perf_counter() - began) * 1000.0
            if rows:
                ack(conn, model, rows)
            at[0] = (at[0] + 1) % BUCKETS
            with lock:
                run.claim_ms += [ms] if rows else []
                run.tasks += len(rows)
                run.empty_claims += not rows
                return run.tasks < budget

        return step

    try:
        run.seconds = harness.run_threads(threads, seconds, start)
    finally:
        for c in conns:
            c.close()
    return run


def report(args: argparse.Namespace, runs: dict[str, list[Run]],
           plans: dict[tuple[str, str], list[dict[str, float]]], machine: list[str]) -> str:
    """The results as markdown, ending with a conclusion that states the numbers."""
    ms = {m: [x for r in runs[m] for x in r.claim_ms] for m in "AB"}
    p50 = {m: harness.percentile(ms[m], 50) for m in "AB"}
    p99 = {m: harness.percentile(ms[m], 99) for m in "AB"}
    rate = {m: harness.median([r.rate for r in runs[m]]) for m in "AB"}
    plan = {k: {f: harness.median([p[f] for p in v]) for f in v[0]} for k, v in plans.items()}
    totals = [[m, p50[m], p99[m], rate[m], harness.median([r.seconds for r in runs[m]]),
               len(ms[m]), sum(r.empty_claims for r in runs[m])] for m in "AB"]
    reps = [[i + 1, *(harness.percentile(runs[m][i].claim_ms, 50) for m in "AB"),
             *(runs[m][i].rate for m in "AB"),
             harness.percentile(runs["B"][i].claim_ms, 50)
             / harness.percentile(runs["A"][i].claim_ms, 50),
             runs["B"][i].rate / runs["A"][i].rate] for i in range(args.reps)]
    explains = [[m, when, p["returned"], p["removed"], p["scan_hit"], p["total_hit"], p["ms"]]
                for (m, when), p in plan.items()]
    return "\n".join([
        "# Lease model: move exec_time to the lease expiry (A) or a lease column (B)", "",
        *machine,
        f"- workload: {args.rows:,} tasks in {BUCKETS} buckets per table, {args.locked:,} held "
        f"locked (claimed, never acked); {args.threads} threads, one connection each, claim "
        f"`LIMIT {args.limit}` with " "`FOR UPDATE SKIP LOCKED`, then delete-ack, buckets "
        "round-robin; "
        f"a run lasts {args.seconds:g} s or until {BUDGET:.0%} of the available tasks are acked; "
        f"{args.reps} rep(s) alternating A, B; tables refilled and VACUUM ANALYZEd before "
        "every run; acks delete by the ctid the claim returned (same in both models)",
        "- A: PK (bucket, queue, status, exec_time, id), claim moves exec_time to now()+lease; "
        "B: PK (bucket, queue, exec_time, id), claim sets lease_expires_at and keeps exec_time; "
        "each table has a partial lease index `WHERE status = 'locked'`",
        "- latency: client-side wall time of claims that returned tasks, pooled over all runs",
        "",
        harness.markdown_table(["model", "claim p50 ms", "claim p99 ms", "median tasks/s",
                               "median run s", "timed claims", "empty claims"], totals),
        "", "Per repetition (runs made side by side):", "",
        harness.markdown_table(["rep", "A p50 ms", "B p50 ms", "A tasks/s", "B tasks/s",
                               "p50 B ÷ A", "tasks/s B ÷ A"], reps),
        "", f"One claim of bucket 0 under `EXPLAIN (ANALYZE, BUFFERS)`, rolled back (median of "
        f"{args.reps} rep(s)); fresh = just after the reset, after load = after the timed run. "
        "Rows read by the index scan = returned + removed by filter; buffers = shared hit + read:",
        "",
        harness.markdown_table(["model", "when", "rows returned", "rows removed by filter",
                               "scan buffers", "statement buffers", "execution ms"], explains),
        "", "## Conclusion", "", conclusion(args, p50, p99, rate, plan), ""])


def conclusion(args: argparse.Namespace, p50: dict[str, float], p99: dict[str, float],
               rate: dict[str, float], plan: dict[tuple[str, str], dict[str, float]]) -> str:
    """One paragraph stating the measured difference."""
    fa, fb = plan[("A", "fresh")], plan[("B", "fresh")]
    la, lb = plan[("A", "after load")], plan[("B", "after load")]
    faster = "A (shardq's choice)" if p50["A"] <= p50["B"] else "B (a lease column)"
    return (
        f"With {args.locked:,} of {args.rows:,} tasks held locked ("
        f"{args.locked / BUCKETS:,.0f} per bucket), a claim of model B read "
        f"{fb['returned'] + fb['removed']:,.0f} rows ({fb['removed']:,.0f} of them "
        f"locked rows dropped by the status filter) and its scan touched {fb['scan_hit']:,.0f} "
        f"buffers to return {fb['returned']:,.0f} tasks, against "
        f"{fa['returned'] + fa['removed']:,.0f} rows and {fa['scan_hit']:,.0f} buffers in model A "
        f"(after the timed load: {lb['scan_hit']:,.0f} against {la['scan_hit']:,.0f}; whole "
        f"statement, with the row updates: {fb['total_hit']:,.0f} against "
        f"{fa['total_hit']:,.0f} fresh).  Under the {args.threads}-thread claim+ack loop the "
        f"claim p50 was {p50['A']:.2f} ms (A) against {p50['B']:.2f} ms (B), B ÷ A = "
        f"{p50['B'] / p50['A']:.2f}x, p99 {p99['A']:.2f} against {p99['B']:.2f} ms "
        f"({p99['B'] / p99['A']:.2f}x), and throughput {rate['A']:,.0f} against "
        f"{rate['B']:,.0f} tasks/s (B ÷ A = {rate['B'] / rate['A']:.2f}x), so model {faster} had "
        "the lower median claim latency on this run.  The read cost of B grows with the number "
        "of in-flight tasks per bucket (every claim steps over them at the head of its range), "
        "while in A they lie outside the range; the rest of a claim's cost, the row updates "
        "and index writes, is of the same order in both."
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line (``--quick``: 50k rows, 2.5k locked, 1 s, 1 rep)."""
    p = argparse.ArgumentParser(prog="python -m bench.lease_model", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, help="tasks per table (default 200000)")
    p.add_argument("--locked", type=int, help="tasks held locked (default 10000)")
    p.add_argument("--seconds", type=float, help="length of one run (default 5)")
    p.add_argument("--reps", type=int, help="repetitions (default 3)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="smoke run (explicit flags still win)")
    p.add_argument("--output", help="file name under bench/results, or an absolute path "
                   "(default lease_model.md, or lease_model-quick.md with --quick)")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    defaults = ({"rows": 50_000, "locked": 2_500, "seconds": 1.0, "reps": 1} if args.quick
                else {"rows": 200_000, "locked": 10_000, "seconds": 5.0, "reps": 3})
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.output = args.output or harness.result_name("lease_model", args.quick)
    if not 0 <= args.locked < args.rows or args.reps < 1 or args.threads < 1:
        p.error("need 0 <= --locked < --rows, and at least one rep and thread")
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print/write its markdown report."""
    args = parse_args(argv)
    with harness.server(args.dsn) as (admin, description), harness.Databases(admin) as dbs:
        url = dbs.create()
        with psycopg.connect(url, autocommit=True) as conn:
            for m in "AB":
                for stmt in DDL.split(";"):
                    conn.execute(q(stmt, m))
        runs: dict[str, list[Run]] = {"A": [], "B": []}
        plans: dict[tuple[str, str], list[dict[str, float]]] = {}
        for rep in range(args.reps):
            for m in "AB":
                reset(url, m, args.rows, args.locked)
                plans.setdefault((m, "fresh"), []).append(explain(url, m, args.limit))
                run = run_once(url, m, args.threads, args.limit, args.seconds,
                               int((args.rows - args.locked) * BUDGET))
                plans.setdefault((m, "after load"), []).append(explain(url, m, args.limit))
                runs[m].append(run)
                print(f"rep {rep + 1}/{args.reps} model {m}: {run.rate:,.0f} tasks/s "
                      f"({run.tasks:,} in {run.seconds:.1f} s), claim p50 "
                      f"{harness.percentile(run.claim_ms, 50):.2f} ms", file=sys.stderr)
        text = report(args, runs, plans, harness.machine_lines(admin, description))
    print(text)
    print(f"written to {harness.write_result(args.output, text)}", file=sys.stderr)


if __name__ == "__main__":
    main()
