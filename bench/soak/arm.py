"""One arm of the soak: its database, producer, daemon and claim probe, and its figures.

The probe (a thread of the harness) runs the daemon's own claim statement (limit 10,
a random bucket) every 100 ms under ``EXPLAIN (ANALYZE, TIMING OFF)`` in a transaction
it rolls back: the server's execution time of a real claim, without the client's
scheduling noise, and nothing is taken from the daemon.  It also counts the buffer
pages the claim touched, which no other load on the machine changes: what bloat and
dead entries cost a claim shows there even when the times are noise-bound.  Every second
it also reads the table's dead rows and vacuum counts, so the peak of each minute
and the moments right after each vacuum (autovacuum or the janitor's) are known.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg

import shardq
from bench.soak.app import PICKUP_TABLE, QUEUE
from shardq.core import migrate

# Revision 0002's autovacuum settings, as revision 0014's downgrade restores them.
OLD_AUTOVACUUM = ("ALTER TABLE shardq.tasks SET (autovacuum_vacuum_threshold = 5000, "
                  "autovacuum_vacuum_insert_threshold = 20000), RESET (vacuum_truncate)")

ROOT = Path(__file__).resolve().parents[2]
PROBE_EVERY_S = 0.1
POLL_EVERY_S = 1.0
AFTER_VACUUM_S = 5.0  # a probe sample this soon after a vacuum ended counts as "right after"
CLAIM_LIKE = "WITH c AS MATERIALIZED%UPDATE shardq.tasks AS t SET%"

FIGURES = """
SELECT pg_relation_size('shardq.tasks'), pg_indexes_size('shardq.tasks'),
       n_live_tup, n_dead_tup, vacuum_count, autovacuum_count
FROM pg_stat_user_tables WHERE relid = 'shardq.tasks'::regclass"""
INDEXES = """
SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
FROM pg_index WHERE indrelid = 'shardq.tasks'::regclass"""
PICKUPS = """
SELECT count(m),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY m),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY m)
FROM soak.pickup, unnest(ms) AS m WHERE at >= %s AND at < %s"""
STATEMENTS = """
SELECT coalesce(sum(wal_bytes), 0)::bigint,
       coalesce(sum(calls) FILTER (WHERE query LIKE %(claim)s), 0)::bigint,
       coalesce(sum(total_exec_time) FILTER (WHERE query LIKE %(claim)s), 0),
       coalesce(max(max_exec_time) FILTER (WHERE query LIKE %(claim)s), 0)
FROM pg_stat_statements WHERE dbid = %(dbid)s::oid AND query NOT LIKE '%%soak.pickup%%'"""


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of ``values``, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


@dataclass
class Probe:
    """What the probe thread has seen since the last minute was taken."""

    claims: list[tuple[float, float, int]] = field(default_factory=list)  # (epoch s, ms, pages)
    vacuum_ends: list[float] = field(default_factory=list)  # epoch s a vacuum was first seen
    peak_dead: int = 0
    acked: int = 0


class Arm:
    """One database with its producer, daemon and probe."""

    def __init__(self, name: str, admin: str, url: str, *, vacuum: bool, rate: float,
                 delayed: int, delay_s: float) -> None:
        self.name, self.admin, self.url, self.vacuum = name, admin, url, vacuum
        self.rate, self.delayed, self.delay_s = rate, delayed, delay_s
        self.procs: list[subprocess.Popen[bytes]] = []
        self.probe = Probe()
        self.all_claims: list[tuple[float, float, int]] = []
        self.all_vacuum_ends: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dbid = 0

    def setup(self) -> None:
        """Schema at head (the old arm: 0014's autovacuum settings back to 0002's, as its
        downgrade leaves them; the rest of the schema is today's, which the daemon
        needs), the pickup table, and the standing backlog of delayed tasks."""
        with open(os.devnull, "w") as sink:
            migrate.upgrade(self.url, bucket_count=16, output=sink)
        with psycopg.connect(self.url, autocommit=True) as conn:
            if not self.vacuum:
                conn.execute(OLD_AUTOVACUUM)
            conn.execute("CREATE SCHEMA IF NOT EXISTS soak")
            conn.execute(PICKUP_TABLE)
            conn.execute("""
                INSERT INTO shardq.tasks (queue, payload, exec_time)
                SELECT %(queue)s, jsonb_build_object('task', 'bench.soak.app.work', 'args',
                         '[]'::jsonb, 'kwargs', jsonb_build_object('t', extract(epoch FROM
                         now() + g * %(step)s * interval '1 second'))),
                       now() + g * %(step)s * interval '1 second'
                FROM generate_series(1, %(n)s) AS g""",
                         {"queue": QUEUE, "n": self.delayed, "step": self.delay_s / self.delayed})
            conn.execute("VACUUM ANALYZE shardq.tasks")
            row = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()"
                               ).fetchone()
            assert row is not None
            self.dbid = int(row[0])

    def start(self) -> None:
        """Start the daemon, the producer and the probe."""
        env = {**os.environ, "SHARDQ_DSN": self.url, "PYTHONPATH": str(ROOT),
               "SHARDQ_VACUUM": "1" if self.vacuum else "0"}
        log = open(f"/tmp/soak-{self.name}-daemon.log", "wb")  # noqa: SIM115
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "shardq", "consume", "bench.soak.app:app", "--queue", QUEUE,
             "--janitors", "1"], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "bench.soak.producer", self.url, "--rate", str(self.rate),
             "--delayed", str(self.delayed), "--delay-s", str(self.delay_s)],
            env=env, cwd=ROOT))
        self._thread = threading.Thread(target=self._probe, name=f"probe-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the probe, then the producer and the daemon."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()

    def alive(self) -> bool:
        """Whether the daemon and the producer still run."""
        return all(p.poll() is None for p in self.procs)

    def _probe(self) -> None:
        with shardq.Client(self.url, pool_max_size=1, vacuum=False) as client, \
                psycopg.connect(self.url, autocommit=True) as conn, \
                psycopg.connect(self.url) as tx:
            st, polled, vacuums = client.statements, 0.0, None
            explain = b"EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, FORMAT JSON) " + st.query(
                "claim", 10)
            while not self._stop.is_set():
                ms, pages = self._timed_claim(tx, explain, st.params(
                    queue=QUEUE, bucket=random.randrange(st.bucket_count), lease_s=30,
                    token=uuid4(), worker_id=None))
                with self._lock:
                    self.probe.claims.append((time.time(), ms, pages))
                if time.monotonic() - polled >= POLL_EVERY_S:
                    polled = time.monotonic()
                    vacuums = self._poll(conn, vacuums)
                self._stop.wait(PROBE_EVERY_S)

    def _timed_claim(self, tx: psycopg.Connection[Any], explain: bytes,
                     params: dict[str, Any]) -> tuple[float, int]:
        """The server's execution time (ms) of one claim, rolled back, and the buffer
        pages it touched: a real claim of the queue's range, with its dead entries and
        locks, that takes nothing."""
        plan = tx.execute(explain, params).fetchone()
        tx.rollback()
        assert plan is not None
        top = plan[0][0]["Plan"]
        return (float(plan[0][0]["Execution Time"]),
                int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"]))

    def _poll(self, conn: psycopg.Connection[Any], before: int | None) -> int:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(FIGURES).fetchone()
        assert row is not None
        count = int(row[4]) + int(row[5])
        with self._lock:
            self.probe.peak_dead = max(self.probe.peak_dead, int(row[3]))
            if before is not None and count > before:
                self.probe.vacuum_ends.append(time.time())
        return count

    def minute(self, since: float, until: float) -> dict[str, Any]:
        """The figures of the window [since, until), and the probe's since the last call."""
        with self._lock:
            probe, self.probe = self.probe, Probe()
        self.all_claims += probe.claims
        self.all_vacuum_ends += probe.vacuum_ends
        ms = [m for _, m, _ in probe.claims]
        pages = [float(n) for _, _, n in probe.claims]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            figures = conn.execute(FIGURES).fetchone()
            picked = conn.execute(PICKUPS, (since, until)).fetchone()
            indexes = {name: int(size) for name, size in conn.execute(INDEXES)}
        with psycopg.connect(self.admin, autocommit=True) as conn:
            wal, calls, total_ms, max_ms = conn.execute(
                STATEMENTS, {"claim": CLAIM_LIKE, "dbid": self.dbid}).fetchone() or (0, 0, 0, 0)
            conn.execute("SELECT pg_stat_statements_reset(0, %s::oid, 0)", (self.dbid,))
        assert figures is not None
        assert picked is not None
        tasks = int(picked[0]) + probe.acked
        return {
            "t": until, "table_bytes": figures[0], "index_bytes": figures[1],
            "live": figures[2], "dead": figures[3], "peak_dead": probe.peak_dead,
            "vacuums": figures[4], "autovacuums": figures[5], "vacuum_ends": probe.vacuum_ends,
            "tasks": tasks, "pickup_p50_ms": picked[1], "pickup_p99_ms": picked[2],
            "probe_claims": len(ms), "claim_p50_ms": percentile(ms, 50),
            "claim_p99_ms": percentile(ms, 99), "claim_p99_pages": percentile(pages, 99),
            "index_sizes": indexes, "statement_wal_bytes": int(wal),
            "claim_calls": int(calls), "claim_mean_ms": total_ms / calls if calls else None,
            "claim_max_ms": float(max_ms),
        }

    def after_vacuum_p99(self) -> tuple[float | None, float | None]:
        """p99 of the probe's claims within AFTER_VACUUM_S of a vacuum being seen: the
        server time (ms) and the pages touched."""
        ends = sorted(self.all_vacuum_ends)
        picked: list[tuple[float, float]] = []
        i = 0
        for at, ms, pages in sorted(self.all_claims):
            while i + 1 < len(ends) and ends[i + 1] <= at:
                i += 1
            if ends and ends[i] <= at < ends[i] + AFTER_VACUUM_S:
                picked.append((ms, float(pages)))
        return (percentile([m for m, _ in picked], 99),
                percentile([n for _, n in picked], 99))
