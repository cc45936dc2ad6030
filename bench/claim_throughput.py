"""Claim throughput of shardq with several bucket counts (default: 16 against 1), side by side.

Each bucket count gets its own fresh database holding the same backlog.  In a
run, T threads share one Client; thread i starts at bucket i*N/T and visits the
buckets round-robin, each step claiming one bucket's batch with
``Client.claim_bucket`` and finishing it with ``Client.ack_many``.  Before every
run the backlog is topped up to its size and the table VACUUM ANALYZEd, so all
runs start alike; configurations alternate within each repetition (16, 1, 16,
1, ...) so that drift on a shared machine hits them equally.

    python -m bench.claim_throughput [--backlog 1000000] [--threads 4] [--limit 100]
        [--seconds 10] [--reps 3] [--buckets 16,1] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

import shardq
from bench import harness

WARMUP_BATCHES = 5
QUICK = {"backlog": 20_000, "seconds": 2.0, "reps": 1}
FULL = {"backlog": 1_000_000, "seconds": 10.0, "reps": 3}


@dataclass
class Run:
    """What one timed run of one configuration produced."""

    buckets: int
    tasks: int = 0
    seconds: float = 0.0
    empty_claims: int = 0
    claim_ms: list[float] = field(default_factory=list)
    ack_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Tasks claimed and acked per second."""
        return self.tasks / self.seconds if self.seconds else 0.0


class _Worker:
    """One thread's state: its next bucket, its counts and latencies."""

    def __init__(self, client: shardq.Client, index: int, threads: int, limit: int) -> None:
        self.client, self.limit, self.n = client, limit, client.bucket_count
        self.bucket = index * self.n // threads
        self.tasks = self.empty = self.empty_in_a_row = 0
        self.claim_ms: list[float] = []
        self.ack_ms: list[float] = []

    def warm_up(self) -> Callable[[], bool]:
        """A few untimed claim + ack steps (connections, prepared statements); the step."""
        for _ in range(WARMUP_BATCHES):
            self.client.ack_many(self.client.claim_bucket(harness.QUEUE, self.bucket,
                                                          limit=self.limit))
            self.bucket = (self.bucket + 1) % self.n
        return self.step

    def step(self) -> bool:
        """Claim one bucket's batch and ack it; False after a whole round of empty buckets."""
        began = time.perf_counter()
        tasks = self.client.claim_bucket(harness.QUEUE, self.bucket, limit=self.limit)
        claimed = time.perf_counter()
        self.claim_ms.append((claimed - began) * 1000.0)
        self.bucket = (self.bucket + 1) % self.n
        if not tasks:
            self.empty += 1
            self.empty_in_a_row += 1
            return self.empty_in_a_row < self.n  # else the backlog ran dry
        self.empty_in_a_row = 0
        self.client.ack_many(tasks)
        self.ack_ms.append((time.perf_counter() - claimed) * 1000.0)
        self.tasks += len(tasks)
        return True


def top_up(url: str, backlog: int) -> None:
    """Bring the queue back to ``backlog`` available tasks, VACUUM ANALYZE and CHECKPOINT."""
    with psycopg.connect(url, autocommit=True) as conn:
        have = int(harness.scalar(
            conn, "SELECT count(*) FROM shardq.tasks WHERE queue = %(queue)s AND status = %(s)s",
            {"queue": harness.QUEUE, "s": "available"}))
        held = int(harness.scalar(
            conn, "SELECT count(*) FROM shardq.tasks WHERE status <> %(s)s", {"s": "available"}))
    if held:
        raise RuntimeError(f"{held} tasks are not available after a run (lost acks?)")
    harness.fill_backlog(url, max(backlog - have, 0))
    harness.checkpoint(url)


def run_once(url: str, buckets: int, threads: int, limit: int, seconds: float) -> Run:
    """One timed run: ``threads`` threads claim and ack for ``seconds`` on database ``url``."""
    with shardq.Client(url, pool_max_size=threads + 1) as client:
        if client.bucket_count != buckets:
            raise RuntimeError(f"database has {client.bucket_count} buckets, not {buckets}")
        client.db.pool.resize(min_size=threads + 1, max_size=threads + 1)
        client.db.pool.wait(timeout=30)
        workers = [_Worker(client, i, threads, limit) for i in range(threads)]
        # Threads end early, and alone, when the backlog runs dry.
        elapsed = harness.run_threads(threads, seconds, lambda i: workers[i].warm_up())
    run = Run(buckets, seconds=elapsed)
    for o in workers:
        run.tasks += o.tasks
        run.empty_claims += o.empty
        run.claim_ms += o.claim_ms
        run.ack_ms += o.ack_ms
    return run


def report(args: argparse.Namespace, configs: list[int], runs: dict[int, list[Run]],
           machine: list[str]) -> str:
    """The results as markdown."""
    base = 1 if 1 in configs else configs[-1]
    rate = {b: harness.median([r.rate for r in runs[b]]) for b in configs}
    lines = [f"# shardq claim throughput: {' vs '.join(map(str, configs))} buckets", ""]
    lines += machine
    lines += [
        f"- workload: backlog {args.backlog:,} tasks per database (topped up and VACUUM "
        f"ANALYZEd before every run), {args.threads} threads sharing one Client "
        f"(pool {args.threads + 1}), each step `claim_bucket(limit={args.limit})` then "
        f"`ack_many`, buckets round-robin from offset i*N/T, {args.seconds:g} s per run, "
        f"{args.reps} rep(s), configurations alternated {','.join(map(str, configs))} per rep",
        "- latencies: client-side wall time of `claim_bucket` / `ack_many` (pool checkout "
        "included), pooled over all runs of a configuration",
        "",
    ]
    rows = []
    for b in configs:
        ms = [m for r in runs[b] for m in r.claim_ms]
        acks = [m for r in runs[b] for m in r.ack_ms]
        rows.append([b, rate[b], ", ".join(f"{r.rate:,.0f}" for r in runs[b]),
                     rate[b] / rate[base], harness.percentile(ms, 50), harness.percentile(ms, 99),
                     harness.percentile(acks, 50), harness.percentile(acks, 99),
                     len(ms), sum(r.empty_claims for r in runs[b])])
    lines.append(harness.markdown_table(
        ["buckets", "median tasks/s", "tasks/s per rep", f"ratio vs {base}", "claim p50 ms",
         "claim p99 ms", "ack p50 ms", "ack p99 ms", "claims", "empty claims"], rows))
    others = [b for b in configs if b != base]
    lines += ["", "Per repetition (ratios of runs made side by side):", ""]
    per_rep = []
    for i in range(args.reps):
        row: list[object] = [i + 1, *(runs[b][i].rate for b in configs)]
        row += [runs[b][i].rate / runs[base][i].rate for b in others]
        per_rep.append(row)
    lines.append(harness.markdown_table(
        ["rep", *(f"{b} buckets tasks/s" for b in configs), *(f"{b} ÷ {base}" for b in others)],
        per_rep))
    lines.append("")
    for b in others:
        ratios = [runs[b][i].rate / runs[base][i].rate for i in range(args.reps)]
        lines.append(f"**{b} buckets ÷ {base} bucket(s): {rate[b] / rate[base]:.2f}x** "
                     f"(ratio of medians; median of per-rep ratios {harness.median(ratios):.2f}x)")
    if any(r.empty_claims for rs in runs.values() for r in rs):
        lines += ["", "Note: some claims came back empty: the backlog ran dry (a thread "
                  "stops after a whole round of empty buckets, and the run with the last "
                  "one), so the end of such runs had less concurrency; use a larger --backlog."]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line (``--quick`` fills in small defaults for a smoke run)."""
    p = argparse.ArgumentParser(prog="python -m bench.claim_throughput", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backlog", type=int, help="tasks per database (default 1000000)")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--limit", type=int, default=100, help="tasks per claim")
    p.add_argument("--seconds", type=float, help="length of one run (default 10)")
    p.add_argument("--reps", type=int, help="repetitions (default 3)")
    p.add_argument("--buckets", default="16,1", help="bucket counts to compare")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: backlog 20000, 2 s, 1 rep (explicit flags still win)")
    p.add_argument("--output", help="file name under bench/results, or an absolute path "
                   "(default claim_throughput.md, or claim_throughput-quick.md with --quick)")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.output is None:
        args.output = harness.result_name("claim_throughput", args.quick)
    args.configs = [int(b) for b in args.buckets.split(",") if b.strip()]
    if not args.configs or args.threads < 1 or args.reps < 1 or args.backlog < 1:
        p.error("need at least one bucket count, thread, rep and task")
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print/write its markdown report."""
    args = parse_args(argv)
    configs: list[int] = args.configs
    log = sys.stderr
    with harness.server(args.dsn) as (admin, description), harness.Databases(admin) as dbs:
        urls: dict[int, str] = {}
        for b in configs:
            print(f"creating a {b}-bucket database with {args.backlog:,} tasks...", file=log)
            urls[b] = dbs.migrated(b)
            harness.fill_backlog(urls[b], args.backlog)
        runs: dict[int, list[Run]] = {b: [] for b in configs}
        for rep in range(args.reps):
            for b in configs:
                top_up(urls[b], args.backlog)
                run = run_once(urls[b], b, args.threads, args.limit, args.seconds)
                runs[b].append(run)
                print(f"rep {rep + 1}/{args.reps} buckets={b}: {run.rate:,.0f} tasks/s "
                      f"({run.tasks:,} in {run.seconds:.1f} s, {run.empty_claims} empty claims)",
                      file=log)
        text = report(args, configs, runs, harness.machine_lines(admin, description))
    print(text)
    path = harness.write_result(args.output, text)
    print(f"written to {path}", file=log)


if __name__ == "__main__":
    main()
