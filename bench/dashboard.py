"""How long the dashboard's pages and API calls take on a 5M-task table, and their pictures.

One fresh database (16 buckets) holds queue 'bulk' with ``--tasks`` tasks (0.5 % locked,
0.5 % dead, 2 % scheduled, the rest due; as bench.stats_cost builds it) and a small queue
'emails' with dead letters, running and scheduled tasks; the hour's throughput is written
as the janitor leaves it (one row per queue and minute).  The dashboard is served by
uvicorn in this process; each page and API call is requested ``--runs`` times after one
warm-up, and the server time it reports (``Server-Timing``) is kept.  shardq.tasks'
sequential-scan counter is read before and after: the dashboard must never scan it.

    python -m bench.dashboard [--tasks 5000000] [--runs 21] [--dsn URL] [--screenshots docs]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import uvicorn

import shardq
from bench import harness, stats_cost
from shardq.web import DashboardConfig, create_app

TOKEN = "bench-token-" + "x" * 24
LIMIT_MS = 100.0
EMAILS = "emails"


def small_queue(client: shardq.Client) -> str:
    """Queue 'emails': due, running, scheduled and dead tasks; returns a dead task's id."""
    client.enqueue_many(EMAILS, [{"to": f"user{n}@example.org", "template": "welcome"}
                                 for n in range(400)])
    client.enqueue_many(EMAILS, [{"to": f"later{n}@example.org", "template": "reminder"}
                                 for n in range(40)], delay_s=1800)
    running = client.claim(EMAILS, limit=30, lease_s=600)
    doomed = running[:6]
    client.nack_many(doomed, ["SMTPRecipientsRefused: 550 mailbox unavailable"] * 6,
                     dead=[True] * 6)
    client.nack(running[6], "TimeoutError: the mail server did not answer", retry_in_s=120)
    return str(doomed[0].id)


def hour_of_throughput(url: str) -> None:
    """An hour of per-minute counts for both queues, as the janitor folds them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.throughput (queue, period, slot, enqueued, completed)
            SELECT q.queue, date_trunc('minute', now()) - m * interval '1 minute', -1,
                   (q.scale * (60 + 40 * sin(m / 9.0)))::int8,
                   (q.scale * (58 + 38 * sin((m + 2) / 9.0)))::int8
            FROM generate_series(1, 59) AS m,
                 (VALUES ('bulk', 600.0), ('emails', 12.0)) AS q(queue, scale)""")


def seq_scans(url: str) -> int:
    """shardq.tasks' sequential scans so far."""
    with psycopg.connect(url) as conn:
        return int(harness.scalar(conn, "SELECT seq_scan FROM pg_stat_user_tables "
                                       "WHERE relid = 'shardq.tasks'::regclass"))


def request(url: str, method: str = "GET") -> tuple[int, float, float]:
    """Status, server ms (Server-Timing) and round-trip ms of one request."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    began = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers,
                                                       data=b"{}" if method == "POST" else None),
                                timeout=60) as reply:
        reply.read()
        status, timing = reply.status, reply.headers["server-timing"]
    took = (time.perf_counter() - began) * 1000
    return status, float(timing.split("dur=")[1]), took


def measure(base: str, paths: list[tuple[str, str]], runs: int) -> list[list[object]]:
    """One row per path: median and slowest server time, median round trip."""
    rows: list[list[object]] = []
    for method, path in paths:
        request(base + path, method)
        server, total = [], []
        for _ in range(runs):
            status, in_app, round_trip = request(base + path, method)
            assert status == 200, (path, status)
            server.append(in_app)
            total.append(round_trip)
        verdict = "ok" if max(server) <= LIMIT_MS else "OVER"
        rows.append([f"{method} {path}", f"{statistics.median(server):.1f}",
                     f"{max(server):.1f}", f"{statistics.median(total):.1f}", verdict])
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


class Served:
    """The dashboard on a free port, served by uvicorn in a thread."""

    def __init__(self, app: Any) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def screenshots(base: str, task_id: str, folder: Path) -> list[Path]:
    """Pictures of the three pages (logged in, so the actions show) in headless Chromium."""
    import shutil

    from playwright.sync_api import sync_playwright

    shots = [("queues", "/"), ("queue", f"/queues/{EMAILS}"), ("task", f"/tasks/{task_id}")]
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                    args=["--no-sandbox", "--disable-gpu",
                                          "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(f"{base}/login")
        page.fill("#token", TOKEN)
        page.click("#login")
        for name, path in shots:
            page.goto(base + path)
            target = folder / f"dashboard-{name}.png"
            page.screenshot(path=str(target), full_page=name != "queue")
            written.append(target)
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    """Measure and write bench/results/dashboard.md (and, with --screenshots, pictures)."""
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--screenshots", type=Path, default=None,
                        help="write dashboard-*.png of each page into this folder")
    parser.add_argument("--quick", action="store_true", help="5,000 tasks, 3 requests per call")
    harness.add_server_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.runs = 5_000, 3
    with harness.server(args.dsn) as (admin, described), harness.Databases(admin) as dbs:
        url = dbs.migrated(16)
        began = time.monotonic()
        stats_cost.fill(url, args.tasks)
        harness.checkpoint(url)
        print(f"filled {args.tasks:,} tasks in {time.monotonic() - began:.0f} s",
              file=sys.stderr, flush=True)
        with shardq.Client(url) as client:
            dead_id = small_queue(client)
            hour_of_throughput(url)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE shardq.tasks")
            paths = [("GET", p) for p in (
                "/", "/fragments/queues", "/queues/bulk", "/fragments/queues/bulk",
                f"/queues/{EMAILS}", f"/tasks/{dead_id}", "/chart.svg", "/chart.svg?queue=bulk",
                "/api/queues", "/api/queues/bulk", f"/api/tasks/{dead_id}",
                "/api/throughput?queue=bulk")]
            paths += [("POST", "/api/queues/bulk/pause"), ("POST", "/api/queues/bulk/resume"),
                      ("POST", "/api/queues/bulk/purge")]
            app = create_app(client, DashboardConfig(), token=TOKEN)
            before = seq_scans(url)
            with Served(app) as base:
                rows = measure(base, paths, args.runs)
                scans = seq_scans(url) - before
                pictures = screenshots(base, dead_id, args.screenshots) \
                    if args.screenshots else []
        lines = ["# Dashboard: server time per page and API call", "",
                 *harness.machine_lines(admin, described),
                 f"- table: {args.tasks:,} tasks in queue 'bulk' (0.5 % locked, 0.5 % dead, "
                 "2 % scheduled) + a small queue 'emails'; 16 buckets",
                 f"- each call: 1 warm-up, then {args.runs} requests; server time from the "
                 "Server-Timing header (request in to response headers out)",
                 f"- command: `python -m bench.dashboard --tasks {args.tasks} --runs {args.runs}`",
                 f"- sequential scans of shardq.tasks during the runs: {scans}", "",
                 harness.markdown_table(["call", "server ms (median)", "server ms (max)",
                                        "round trip ms (median)", f"≤ {LIMIT_MS:.0f} ms"],
                                       rows)]
        if pictures:
            lines += ["", "Screenshots: " + ", ".join(p.name for p in pictures)]
        name = harness.result_name("dashboard", args.quick)
        print(harness.write_result(name, "\n".join(lines)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
