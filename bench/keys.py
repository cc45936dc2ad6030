"""What keyed tasks cost, and what unkeyed tasks pay for their existence.

In each repetition every configuration gets its own fresh migrated database (16
buckets) and the configurations take turns in short timed blocks (100 single
enqueues, one batch, or a claim+ack slice of a quarter of ``--seconds``), in an order
rotated per rep, so drift on a shared machine hits them alike; ratios are medians of
the per-rep ratios.

1. enqueue: single ``Client.enqueue`` calls unkeyed, with ``key=`` all distinct, and
   on 50 hot keys (all coalesce: the warm-up created the keys); batches of 1,000 with
   ``enqueue_many`` (COPY) against ``enqueue_many(keys=...)`` with distinct keys.
2. claim+ack: T threads ``claim_bucket(limit=L)`` round-robin + ``ack_many`` on a
   backlog that is unkeyed or keyed with distinct keys, each also with 50 hot keys
   that have a running task and a waiting follow-up at the head of the line.
3. ``EXPLAIN (ANALYZE, BUFFERS)`` of one unkeyed claim and one unkeyed enqueue on a
   table of unkeyed tasks alone, plus as many keyed tasks, or plus as many unkeyed
   ones laid out exactly like the keyed ones (the control).

    python -m bench.keys [--quick] [--reps 3] [--seconds 8] [--backlog 200000] [--dsn URL]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

import shardq
from bench import harness
from shardq.core import sqlfiles

Q, BUCKETS, HOT, BATCH, THREADS, LIMIT = harness.QUEUE, 16, 50, 1000, 4, 100
SINGLE = ("unkeyed", "key=, distinct", "key=, 50 hot keys")
MANY = ("COPY, unkeyed", "keys=, distinct")
BACKLOGS = ("unkeyed", "keyed, distinct", "unkeyed + 50 hot", "keyed + 50 hot",
            "unkeyed + 10k running", "keyed + 10k running")
RUNNING, SLICES = 10_000, 4
QUICK = {"single": 200, "batches": 2, "backlog": 5_000, "seconds": 1.0, "reps": 1, "rows": 5_000}
FULL = {"single": 2_000, "batches": 20, "backlog": 200_000, "seconds": 8.0, "reps": 3,
        "rows": 50_000}

FILL = ("INSERT INTO shardq.tasks (queue, payload, key) SELECT %(q)s, jsonb_build_object('n', g), "
        "CASE WHEN %(keyed)s THEN 'k' || g END FROM generate_series(1, %(n)s) g")
# n keys with a running task (lease an hour out) and maybe a follow-up older than everything.
HOT_KEYS = ("INSERT INTO shardq.tasks (queue, payload, key, status, exec_time, lease_token) "
            "SELECT %(q)s, '{}', 'hot' || g, s, CASE s WHEN 'locked' THEN now() + interval "
            "'1 hour' ELSE now() - interval '1 hour' END, CASE s WHEN 'locked' THEN "
            "gen_random_uuid() END FROM generate_series(1, %(n)s) g, "
            "unnest(%(statuses)s::text[]) s")
# Part 3: identical unkeyed rows first (fixed ids, fixed order), then the extra rows.
BASE = ("INSERT INTO shardq.tasks (id, queue, payload, exec_time) SELECT md5('b' || g)::uuid, "
        "%(q)s, jsonb_build_object('n', g), now() - interval '2 hours' + g * interval '1 ms' "
        "FROM generate_series(1, %(n)s) g")
EXTRA = ("INSERT INTO shardq.tasks (id, queue, payload, key, status, exec_time, lease_token) "
         "SELECT md5(%(tag)s || g)::uuid, %(q)s, jsonb_build_object('n', g), "
         "CASE WHEN %(keyed)s THEN %(key)s || g END, %(status)s, "
         "now() + %(at)s * interval '1 hour', CASE WHEN %(status)s = 'locked' "
         "THEN gen_random_uuid() END FROM generate_series(1, %(n)s) g")
Plan = dict[str, Any]


def _rotated(configs: tuple[str, ...], rep: int) -> list[str]:
    return [configs[(rep + i) % len(configs)] for i in range(len(configs))]


class Producer:
    """One enqueue configuration on its own database; times only the blocks it runs."""

    def __init__(self, url: str, config: str) -> None:
        self.client, self.config = shardq.Client(url), config
        self.n = self.timed = self.coalesced = 0
        self.seconds = 0.0

    def block(self, count: int, timed: bool = True) -> None:
        """``count`` single enqueues, or one batch of 1,000 for the ``MANY`` configurations."""
        began = time.perf_counter()
        c = self.config
        if c in MANY:
            count = BATCH
            self.client.enqueue_many(Q, [{"i": i} for i in range(BATCH)], keys=None if c == MANY[0]
                                     else [f"k{self.n}-{i}" for i in range(BATCH)])
        for i in range(self.n, self.n + count if c in SINGLE else self.n):
            key = None if c == SINGLE[0] else f"hot{i % HOT}" if c == SINGLE[2] else f"k{i}"
            self.coalesced += self.client.enqueue(Q, {"i": i}, key=key).coalesced * timed
        self.n += count
        if timed:
            self.seconds += time.perf_counter() - began
            self.timed += count

    @property
    def rate(self) -> float:
        """Tasks per second over the timed blocks."""
        return self.timed / self.seconds


def enqueue_rep(admin: str, configs: tuple[str, ...], rounds: int, block: int,
                rep: int) -> dict[str, float]:
    """One rep: a fresh database per configuration, timed blocks alternated round by round."""
    with harness.Databases(admin, prefix="shardq_keys") as dbs:
        producers = [Producer(dbs.migrated(BUCKETS), c) for c in _rotated(configs, rep)]
        try:
            for p in producers:
                p.block(HOT, timed=False)  # connections, prepared statements, the hot keys
            for _ in range(rounds):
                for p in producers:
                    p.block(block)
        finally:
            for p in producers:
                p.client.close()
    for p in producers:
        if p.coalesced != (p.timed if p.config == SINGLE[2] else 0):
            raise RuntimeError(f"{p.config}: {p.coalesced} of {p.timed} enqueues coalesced")
    return {p.config: p.rate for p in producers}


def walk(node: Plan) -> Iterator[Plan]:
    """A plan node and all nodes below it."""
    yield node
    for child in node.get("Plans", []):
        yield from walk(child)


def explain(conn: harness.Connection, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """One statement under EXPLAIN (ANALYZE, BUFFERS), rolled back: rows, loops, buffers."""
    query = sqlfiles.query(name, "postgresql", "bucket", LIMIT)
    with conn.transaction(force_rollback=True):
        doc = harness.scalar(conn, sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + query,
                            {"now": None, "queue": Q, **params})
    doc = json.loads(doc) if isinstance(doc, str) else doc
    top = doc[0]["Plan"]
    scan = next((n for n in walk(top) if n.get("Index Name") == "tasks_pkey"), {})
    checks = [n for n in walk(top) if n.get("Parent Relationship") == "SubPlan"
              and any(m.get("Relation Name") == "tasks" for m in walk(n))]  # not the NOTIFY
    return {"rows": scan.get("Actual Rows", 0), "removed": scan.get("Rows Removed by Filter", 0),
            "loops": sum(n["Actual Loops"] for n in checks),
            "check": sum(_buffers(n) for n in checks), "buffers": _buffers(top),
            "scan_buffers": _buffers(scan) if scan else 0,
            "shape": " > ".join(n["Node Type"] for n in walk(top)), "ms": doc[0]["Execution Time"]}


def _buffers(node: Plan) -> int:
    return int(node["Shared Hit Blocks"] + node["Shared Read Blocks"])


# generation 0: the layout of a schema as the migrations make it (claims check it).
CLAIM_PARAMS = {"bucket": 3, "lease_s": 30.0, "worker_id": None, "token": uuid.uuid4(),
                "generation": 0}
ENQUEUE_PARAMS = {"payload": Jsonb({"n": 0}), "run_at": None, "delay_s": None, "priority": 0,
                  "max_attempts": 10, "notify": True, "id": uuid.uuid4(), "group": None,
                  "trace_context": None}  # each EXPLAIN is rolled back: one id serves


class Claimer:
    """One claim+ack thread: its next bucket, count and claim latencies."""

    def __init__(self, client: shardq.Client, index: int) -> None:
        self.client, self.bucket, self.tasks, self.empty = client, index * BUCKETS // THREADS, 0, 0
        self.claim_ms: list[float] = []

    def step(self) -> bool:
        """Claim one bucket's batch and ack it; False after a round of empty buckets."""
        began = time.perf_counter()
        tasks = self.client.claim_bucket(Q, self.bucket, limit=LIMIT)
        self.claim_ms.append((time.perf_counter() - began) * 1000.0)
        self.bucket = (self.bucket + 1) % BUCKETS
        self.empty = 0 if tasks else self.empty + 1
        if tasks:
            self.client.ack_many(tasks)
            self.tasks += len(tasks)
        return self.empty < BUCKETS


def _fill(c: str, url: str, backlog: int) -> dict[str, Any]:
    """Fill ``url`` with backlog kind ``c``; the claim's plan on it, and no time yet."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FILL, {"q": Q, "keyed": c.startswith("keyed"), "n": backlog})
        if _held(c):
            conn.execute(HOT_KEYS, {"q": Q, "n": _held(c)["locked"],
                                    "statuses": list(_held(c))})
        conn.execute("VACUUM ANALYZE shardq.tasks")
        filled = {"plan": explain(conn, "claim", {**CLAIM_PARAMS, "bucket": 0}),
                  "seconds": 0.0}
    harness.checkpoint(url)
    return filled


def claim_rep(admin: str, backlog: int, seconds: float, rep: int) -> dict[str, dict[str, Any]]:
    """One rep: each backlog kind on its own database, EXPLAIN one claim each, then
    ``SLICES`` rounds of claim+ack runs of ``seconds / SLICES``, alternating the kinds."""
    configs = _rotated(BACKLOGS, rep)
    with harness.Databases(admin, prefix="shardq_keys") as dbs:
        urls = {c: dbs.migrated(BUCKETS) for c in configs}
        out = {c: _fill(c, url, backlog) for c, url in urls.items()}
        clients = {c: shardq.Client(u, pool_max_size=THREADS + 1) for c, u in urls.items()}
        try:
            workers = {c: [Claimer(clients[c], i) for i in range(THREADS)] for c in configs}
            for slice_ in range(SLICES):
                for c in configs:
                    def start(i: int, w: list[Claimer] = workers[c],
                              warm: bool = slice_ == 0) -> Callable[[], bool]:
                        if warm:  # untimed: connections, prepared statements
                            for _ in range(3):
                                w[i].step()
                            w[i].tasks, w[i].claim_ms = 0, []
                        return w[i].step

                    out[c]["seconds"] += harness.run_threads(THREADS, seconds / SLICES, start)
        finally:
            for client in clients.values():
                client.close()
        for c, url in urls.items():
            with psycopg.connect(url, autocommit=True) as conn:
                out[c]["after"] = explain(conn, "claim", {**CLAIM_PARAMS, "bucket": 0})
                held: dict[str, int] = dict(conn.execute(
                    "SELECT status, count(*) FROM shardq.tasks WHERE key LIKE 'hot%%' GROUP BY 1"
                ).fetchall())
            if held != _held(c):
                raise RuntimeError(f"{c}: the hot keys' tasks changed during the run: {held}")
            out[c]["rate"] = sum(w.tasks for w in workers[c]) / out[c]["seconds"]
            out[c]["claim_ms"] = [m for w in workers[c] for m in w.claim_ms]
    return out


def _held(config: str) -> dict[str, int]:
    """Tasks of hot keys by status that ``config`` adds (and that must not change)."""
    if config.endswith("hot"):
        return {"available": HOT, "locked": HOT}
    return {"locked": RUNNING} if config.endswith("running") else {}


def explain_tables(admin: str, rows: int) -> list[list[object]]:
    """Part 3: one unkeyed claim and enqueue on base, base + keyed, base + unkeyed (control)."""
    out: list[list[object]] = []
    run = rows // 20  # running keyed tasks, each with a follow-up
    for label, keyed, extra in (("unkeyed only", False, 0), ("+ keyed tasks", True, rows),
                                ("+ unkeyed tasks (control)", False, rows)):
        with harness.Databases(admin, prefix="shardq_keys") as dbs, \
                psycopg.connect(dbs.migrated(BUCKETS), autocommit=True) as conn:
            conn.execute(BASE, {"q": Q, "n": rows})
            # Waiting keys w1.., running keys r1.. and their follow-ups (same keys, ids f1..).
            for tag, key, n, status, at in (("w", "w", extra - 2 * run, "available", -1),
                                            ("r", "r", run, "locked", 1),
                                            ("f", "r", run, "available", -0.5)):
                if extra:
                    conn.execute(EXTRA, {"q": Q, "tag": tag, "key": key, "n": n, "keyed": keyed,
                                         "status": status, "at": at})
            conn.execute("VACUUM ANALYZE shardq.tasks")
            counts = conn.execute("SELECT count(*), count(key) FROM shardq.tasks").fetchone()
            for name, params in (("claim", CLAIM_PARAMS), ("enqueue", ENQUEUE_PARAMS)):
                got = [explain(conn, name, params) for _ in range(6)][1:]  # the first warms up
                buffers = sorted(g["buffers"] for g in got)
                scans = sorted(g["scan_buffers"] for g in got)
                out.append([label, counts, name, got[0]["shape"], got[0]["rows"],
                            got[0]["removed"], got[0]["loops"], f"{scans[0]}-{scans[-1]}",
                            harness.median(buffers), f"{buffers[0]}-{buffers[-1]}"])
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the three parts; print the markdown report and write it to bench/results."""
    p = argparse.ArgumentParser(prog="python -m bench.keys", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("single", "batches", "backlog", "reps", "rows"):
        p.add_argument(f"--{flag}", type=int)
    p.add_argument("--seconds", type=float)
    p.add_argument("--quick", action="store_true", help="tiny sizes, 1 rep")
    harness.add_server_argument(p)
    a = p.parse_args(argv)
    for k, v in (QUICK if a.quick else FULL).items():
        setattr(a, k, v if getattr(a, k) is None else getattr(a, k))
    log = sys.stderr
    single: dict[str, list[float]] = {c: [] for c in SINGLE}
    many: dict[str, list[float]] = {c: [] for c in MANY}
    claims: dict[str, list[dict[str, Any]]] = {c: [] for c in BACKLOGS}
    with harness.server(a.dsn) as (admin, description):
        for rep in range(a.reps):
            for c, r in enqueue_rep(admin, SINGLE, a.single // 100, 100, rep).items():
                single[c].append(r)
            for c, r in enqueue_rep(admin, MANY, a.batches, BATCH, rep).items():
                many[c].append(r)
            for c, run in claim_rep(admin, a.backlog, a.seconds, rep).items():
                claims[c].append(run)
            print(f"rep {rep + 1}:", {c: round(v[-1]) for c, v in (*single.items(), *many.items())},
                  {c: round(v[-1]["rate"]) for c, v in claims.items()}, file=log)
        plans = explain_tables(admin, a.rows)
        machine = harness.machine_lines(admin, description)
    text = report(a, single, many, claims, plans, machine)
    print(text)
    harness.write_result(harness.result_name("keys", a.quick), text)


def _rates(runs: dict[str, list[float]]) -> list[list[object]]:
    base = runs[next(iter(runs))]
    return [[c, harness.median(v), ", ".join(f"{x:,.0f}" for x in v),
             harness.median([x / b for x, b in zip(v, base, strict=True)])]
            for c, v in runs.items()]


def report(a: argparse.Namespace, single: dict[str, list[float]], many: dict[str, list[float]],
           claims: dict[str, list[dict[str, Any]]], plans: list[list[object]],
           machine: list[str]) -> str:
    """The results as markdown."""
    rate_of = {c: [r["rate"] for r in rs] for c, rs in claims.items()}
    rows = []
    for (c, med, per_rep, ratio), rs in zip(_rates(rate_of), claims.values(), strict=True):
        ms = [m for r in rs for m in r["claim_ms"]]
        pl = rs[0]["plan"]
        rows.append([c, med, per_rep, ratio, harness.percentile(ms, 50), harness.percentile(ms, 99),
                     pl["rows"], pl["removed"], pl["loops"], pl["check"],
                     harness.median([r["after"]["check"] for r in rs]), pl["buffers"],
                     harness.median([r["after"]["buffers"] for r in rs]),
                     harness.median([r["plan"]["ms"] for r in rs]),
                     harness.median([r["after"]["ms"] for r in rs])])
    headers = ["configuration", "median tasks/s", "tasks/s per rep", "÷ first row (median)"]
    return "\n".join([
        "# Keyed tasks: what they cost, and what unkeyed tasks pay", "", *machine,
        f"- {a.reps} rep(s); per rep every configuration on its own fresh database with "
        f"{BUCKETS} buckets, the configurations taking turns in short timed blocks (order "
        "rotated per rep); ratios: medians of the per-rep ratios to the first row", "",
        f"## Enqueue, one thread, {a.single:,} single calls per configuration and rep "
        "(blocks of 100; notify on)", "",
        harness.markdown_table(headers, _rates(single)), "",
        f"The 50-hot-keys runs coalesced every timed enqueue into a waiting task. "
        f"Batches: {a.batches} x `enqueue_many` of {BATCH:,} per configuration and rep:", "",
        harness.markdown_table(headers, _rates(many)), "",
        f"## Claim+ack, {THREADS} threads, `claim_bucket(limit={LIMIT})` round-robin + "
        f"`ack_many` on a {a.backlog:,}-task backlog, {a.seconds:g} s per configuration and "
        f"rep in {SLICES} slices", "",
        "`+ 50 hot`: 50 keys each with a running task (lease an hour out) and a follow-up "
        "older than every other task, so claims of its bucket pass over it. `+ 10k "
        f"running`: {RUNNING:,} other keys with a running task and no follow-up. EXPLAIN "
        "columns: one claim of bucket 0 (rolled back) before the rep's runs (scan rows "
        "returned / removed by filter, keyed-check subplan loops and buffers: first rep) "
        "and after them (`after`: medians over reps), with the dead index entries the "
        "runs left behind (no VACUUM in between).", "",
        harness.markdown_table([*headers, "claim p50 ms", "claim p99 ms", "scan rows",
                               "removed", "check loops", "check buffers",
                               "check buffers after", "buffers", "buffers after",
                               "EXPLAIN ms", "EXPLAIN ms after"], rows), "",
        "## Unkeyed tasks pay nothing: EXPLAIN (ANALYZE, BUFFERS), rolled back", "",
        f"{a.rows:,} identical unkeyed tasks (fixed ids and insertion order); then either "
        f"nothing, {a.rows:,} keyed tasks in the same queue behind them in line "
        f"({a.rows - a.rows // 10:,} waiting, {a.rows // 20:,} running with a follow-up "
        "each), or the same rows without keys. Claim: bucket 3, limit 100; enqueue: one "
        "unkeyed `enqueue` (random id). Buffers: shared hit+read of the claim's index scan "
        "of tasks_pkey (range), and of the whole statement (median and range), over 5 runs "
        "after a warm-up.", "",
        harness.markdown_table(["table", "(rows, keyed)", "statement", "plan", "scan rows",
                               "removed", "check loops", "scan buffers",
                               "buffers (median)", "buffers (range)"], plans), ""])


if __name__ == "__main__":
    main()
