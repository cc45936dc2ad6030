"""Slow tasks under ``shardq consume --processes 2``: how they split, how long they took.

N tasks of D seconds each are enqueued before the daemon starts.  Each run records its
process, its start and end, and how long its task had waited locked since its claim
(the handler reads the claim time from the task's row, which exists until the ack).
An even split needs N / P tasks per process and about N·D / (P·C) seconds of wall time.
``--tree DIR`` runs the daemon of another source tree instead (this file must be in
its ``bench/``), such as an export of an older commit.

    python -m bench.prefetch_split [--tasks 96] [--seconds 6] [--concurrency 8]
        [--processes 2] [--tree DIR] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

import shardq
from bench import harness

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "split"
RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS bench_split (
    pid int NOT NULL, started float8 NOT NULL, ended float8 NOT NULL, waited_s float8 NOT NULL
)"""

app = shardq.App()


@app.task(queue=QUEUE, lease_s=30)
def slow(seconds: float) -> None:
    """Sleeps ``seconds``; records the run and how long the task waited since its claim."""
    started = time.time()
    with psycopg.connect(os.environ["SHARDQ_DSN"], autocommit=True) as conn:
        row = conn.execute("SELECT extract(epoch FROM last_claimed_at) FROM shardq.tasks "
                           "WHERE id = %s", (shardq.current().task.id,)).fetchone()
        time.sleep(seconds)
        conn.execute("INSERT INTO bench_split VALUES (%s, %s, %s, %s)",
                     (os.getpid(), started, time.time(), started - float(row[0]) if row else 0))


@dataclass
class Result:
    """Tasks run by each process (most first), wall time from the first start to the
    last end, the longest a task waited locked since its claim, and the even split's time."""

    per_process: list[int]
    wall_s: float
    max_wait_s: float
    even_wall_s: float


def run(url: str, tree: Path, tasks: int, seconds: float, concurrency: int,
        processes: int) -> Result:
    """Enqueue, run the daemon until the queue is empty, and summarise the runs."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RUNS_TABLE)
    # The task's name is its module's: the daemon imports this one as bench.prefetch_split,
    # so enqueue through that module too, not through __main__.
    named = importlib.import_module("bench.prefetch_split")
    with shardq.Client(url) as client:
        named.app.use_client(client)
        named.slow.enqueue_many([(seconds,)] * tasks)
    env = {**os.environ, "SHARDQ_DSN": url, "PYTHONPATH": str(tree)}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "shardq", "consume", "bench.prefetch_split:app",
         "--processes", str(processes), "--concurrency", str(concurrency)],
        cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + tasks * seconds + 120
        with psycopg.connect(url, autocommit=True) as conn:
            while harness.scalar(conn, "SELECT count(*) FROM shardq.tasks "
                                      "WHERE status <> 'dead'") > 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("the daemon did not finish the tasks in time")
                time.sleep(0.2)
            per_pid = [n for (n,) in conn.execute(
                "SELECT count(*) FROM bench_split GROUP BY pid ORDER BY 1 DESC").fetchall()]
            wall, waited = conn.execute(
                "SELECT max(ended) - min(started), max(waited_s) FROM bench_split").fetchone() or (
                0, 0)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
    if sum(per_pid) != tasks:
        raise RuntimeError("not every task ran (see the dead tasks' last_error)")
    return Result(per_pid, float(wall), float(waited), tasks * seconds / (processes * concurrency))


def main(argv: list[str] | None = None) -> int:
    """Run once, print a Markdown summary and write it to bench/results."""
    p = argparse.ArgumentParser(prog="python -m bench.prefetch_split", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=96)
    p.add_argument("--seconds", type=float, default=6.0, help="each task's duration")
    p.add_argument("--concurrency", type=int, default=8, help="handler slots per process")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--tree", type=Path, default=ROOT, help="source tree whose daemon runs")
    p.add_argument("--quick", action="store_true", help="24 tasks of 1 s, 4 slots per process")
    p.add_argument("--output", default=None, help="file name under bench/results "
                   "(default prefetch_split.md, or prefetch_split-quick.md with --quick)")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    if args.quick:
        args.tasks, args.seconds, args.concurrency = 24, 1.0, 4
    with harness.server(args.dsn) as (admin, description), harness.Databases(admin) as dbs:
        result = run(dbs.migrated(16), args.tree.resolve(), args.tasks, args.seconds,
                     args.concurrency, args.processes)
        machine = harness.machine_lines(admin, description)
    command = (f"python -m bench.prefetch_split --tasks {args.tasks} --seconds {args.seconds:g} "
               f"--concurrency {args.concurrency} --processes {args.processes}"
               + (f" --tree {args.tree}" if args.tree.resolve() != ROOT else ""))
    table = harness.markdown_table(
        ["tasks per process", "wall s", "even split s", "longest wait since claim s"],
        [[" / ".join(map(str, result.per_process)), f"{result.wall_s:.1f}",
          f"{result.even_wall_s:.1f}", f"{result.max_wait_s:.1f}"]])
    text = "\n".join(["# Slow tasks over worker processes", "", f"`{command}`", "",
                      *machine, "", table])
    print(text)
    harness.write_result(args.output or harness.result_name("prefetch_split", args.quick), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
