"""The ``shardq consume`` daemon measured as a user runs it (a subprocess).

``python -m bench.daemon drain``: N no-op tasks pre-enqueued, the daemon started,
time until the table is empty; batched acks (the defaults) against one ack per
statement, side by side.  ``python -m bench.daemon pickup``: enqueue → handler start
latency of an idle daemon, LISTEN/NOTIFY against polling alone, side by side.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from bench.harness import (
    Databases,
    add_server_argument,
    machine_lines,
    markdown_table,
    median,
    percentile,
    server,
    write_result,
)

ROOT = Path(__file__).resolve().parents[2]
DRAIN_MODES = {
    "batched acks": ["--ack-batch", "200", "--ack-flush-ms", "5"],
    "unbatched acks": ["--ack-batch", "1", "--ack-flush-ms", "1"],
}
PICKUP_MODES = {"LISTEN/NOTIFY": True, "polling only": False}


def start_daemon(url: str, *args: str) -> subprocess.Popen[str]:
    """Start ``shardq consume bench.daemon.app:app`` on ``url``."""
    env = {**os.environ, "SHARDQ_DSN": url, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "shardq", "consume", "bench.daemon.app:app", "--janitors", "0",
         *args], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)


def stop_daemon(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, and insist on a clean exit."""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"daemon exited {proc.returncode}: {err[-2000:]}")


def count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM shardq.tasks").fetchone()
    return int(row[0]) if row else 0


def drain_once(dbs: Databases, tasks: int, flags: list[str]) -> float:
    """Tasks/s of one daemon draining ``tasks`` pre-enqueued no-op tasks."""
    import shardq
    from bench.daemon.app import app, noop

    url = dbs.migrated(16)
    with shardq.Client(url) as client:
        app.use_client(client)  # the task function enqueues through this database's Client
        for first in range(0, tasks, 5000):
            noop.enqueue_many([(n,) for n in range(first, min(first + 5000, tasks))])
    start = time.monotonic()
    proc = start_daemon(url, "--queue", "drain", "--concurrency", "8", "--batch", "100", *flags)
    while count(url) > 0:
        if proc.poll() is not None:  # the daemon died: the table would never empty
            raise RuntimeError(f"daemon exited {proc.returncode}: {proc.stderr.read()[-2000:]}"
                               if proc.stderr else f"daemon exited {proc.returncode}")
        time.sleep(0.05)
    elapsed = time.monotonic() - start
    stop_daemon(proc)
    return tasks / elapsed


def drain(admin: str, dbs: Databases, tasks: int, reps: int) -> str:
    """The drain table: tasks/s per mode and the batched ÷ unbatched ratio."""
    rates: dict[str, list[float]] = {mode: [] for mode in DRAIN_MODES}
    for rep in range(reps):
        for mode, flags in DRAIN_MODES.items():
            rates[mode].append(drain_once(dbs, tasks, flags))
            print(f"rep {rep + 1}: {mode}: {rates[mode][-1]:,.0f} tasks/s", file=sys.stderr)
    ratios = [b / u for b, u in zip(rates["batched acks"], rates["unbatched acks"], strict=True)]
    rows = [[mode, median(r), ", ".join(f"{x:,.0f}" for x in r)] for mode, r in rates.items()]
    return "\n".join([
        f"# Drain: {tasks:,} no-op tasks, daemon from start to empty table", "",
        *machine_lines(admin, "see --dsn"), "- daemon: --concurrency 8 --batch 100, "
        "16 buckets, default claimers (8), tasks enqueued before the daemon starts", "",
        markdown_table(["acks", "median tasks/s", "per rep"], rows), "",
        f"**batched ÷ unbatched: {median(ratios):.2f}x** (median of per-rep ratios "
        f"{', '.join(f'{r:.2f}' for r in ratios)})", ""])


def pickup_once(dbs: Databases, tasks: int, listen: bool) -> list[float]:
    """Pickup latencies (ms) of ``tasks`` tasks enqueued one by one to an idle daemon."""
    import shardq
    from bench.daemon.app import PICKUP_TABLE

    url = dbs.migrated(16)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(PICKUP_TABLE)
    mode = "listen" if listen else "poll"
    proc = start_daemon(url, "--queue", "pickup", *([] if listen else ["--no-listen"]))
    time.sleep(3)  # idle: every bucket has cooled down to the longest poll interval
    with shardq.Client(url, notify=listen) as client:
        for _ in range(tasks):
            client.enqueue("pickup", {"task": "bench.daemon.app.picked", "args": [],
                                      "kwargs": {"enqueued_at": time.time(), "mode": mode}})
            time.sleep(0.05)
    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute("SELECT started_at - enqueued_at FROM bench_pickup").fetchall()
            if len(rows) >= tasks:
                break
            time.sleep(0.1)
    stop_daemon(proc)
    return [r[0] * 1000 for r in rows]


def pickup(admin: str, dbs: Databases, tasks: int, reps: int) -> str:
    """The pickup table: p50/p95/p99 per mode and the polling ÷ LISTEN ratio of p50s."""
    latencies: dict[str, list[float]] = {mode: [] for mode in PICKUP_MODES}
    for rep in range(reps):
        for mode, listen in PICKUP_MODES.items():
            latencies[mode] += pickup_once(dbs, tasks, listen)
            print(f"rep {rep + 1}: {mode}: p50 {percentile(latencies[mode], 50):.1f} ms",
                  file=sys.stderr)
    rows = [[mode, len(ms), percentile(ms, 50), percentile(ms, 95), percentile(ms, 99)]
            for mode, ms in latencies.items()]
    listen_p50 = percentile(latencies["LISTEN/NOTIFY"], 50)
    poll_p50 = percentile(latencies["polling only"], 50)
    return "\n".join([
        "# Pickup latency: enqueue → handler start, idle daemon", "",
        *machine_lines(admin, "see --dsn"), "- one task every 50 ms; daemon defaults "
        "(--poll-max-ms 1000); the producer sends NOTIFY only in the LISTEN mode", "",
        markdown_table(["mode", "tasks", "p50 ms", "p95 ms", "p99 ms"], rows), "",
        f"**polling ÷ LISTEN/NOTIFY, p50: {poll_p50 / listen_p50:.1f}x**", ""])


def main() -> None:
    """Run the ``drain`` or ``pickup`` benchmark."""
    parser = argparse.ArgumentParser(prog="python -m bench.daemon", description=__doc__)
    parser.add_argument("scenario", choices=["drain", "pickup"])
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small and one repetition")
    add_server_argument(parser)
    args = parser.parse_args()
    reps = 1 if args.quick else args.reps
    with server(args.dsn) as (admin, _description), Databases(admin) as dbs:
        if args.scenario == "drain":
            text = drain(admin, dbs, args.tasks or (2000 if args.quick else 50_000), reps)
        else:
            text = pickup(admin, dbs, args.tasks or (20 if args.quick else 100), reps)
    suffix = "-quick" if args.quick else ""
    print(text)
    write_result(f"daemon_{args.scenario}{suffix}.md", text)


if __name__ == "__main__":
    main()
