"""``shardq doctor``: checks of a live database, each with concrete advice.

Each check reads the server's own statistics and settings (or, for the limits,
shardq's own figures) and returns a
:class:`Finding`: what it saw, and what to do when that is a problem.  Nothing is
changed on the server (the LISTEN check uses a channel of its own, not the workers').
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Collection
from typing import Any

import psycopg

from shardq.cli.finding import CHECKS as CHECKS  # re-exported: doctor.CHECKS
from shardq.cli.finding import Finding as Finding  # re-exported: doctor.Finding
from shardq.cli.pooler import Pooler, connect, look, pooled_connections, pooler_check
from shardq.client import Client
from shardq.core import sqlfiles
from shardq.core.config import ClientConfig
from shardq.core.errors import ShardqError, is_lost_statement
from shardq.core.plan import plan
from shardq.loops import vacuum
from shardq.ops import control, flow, queuestats
from shardq.ops.queuestats import QueueStats
from shardq.worker.config import WorkerConfig

# Dead rows of shardq.tasks past which vacuum is behind: the table's own trigger is
# 1,000 dead rows (migration 0014; 5,000 before), the janitor's vacuum_dead_rows 5,000,
# but autovacuum comes at most once per autovacuum_naptime: a minute at 1,000 tasks/s
# leaves ~120,000 behind without the janitor's step.
DEAD_ROWS_BEHIND = 50_000
OLD_XMIN_S = 600.0  # a snapshot this old holds back every vacuum of the database
# A B-tree entry of shardq's indexes is at most about this many bytes (key, tuple
# header, line pointer); pages are filled to 90% at most.
NOTIFY_WAIT_S = 2.0
CHANNEL = "shardq_doctor"
# gen_random_uuid() without an extension (13), and TID range scans (14): the stats read
# a sample of the table's pages through them, where 13 would scan the whole table.
SUPPORTED_POSTGRESQL = 14
# A limit full at one instant is a limit doing its job; full at every one of a few
# looks spread over ~1.2 s, while due tasks wait, is a limit that sets the pace.
SATURATION_SAMPLES = 4
SATURATION_GAP_S = 0.4


Conn = psycopg.Connection[tuple[Any, ...]]


def _one(conn: Conn, name: str, params: Any = None) -> tuple[Any, ...]:
    row = conn.execute(sqlfiles.plain(name), params).fetchone()
    assert row is not None  # every query here returns one row
    return row


def server_version(conn: Conn) -> Finding:
    """The engine and its version, against what shardq supports."""
    version = str(_one(conn, "server_version")[0])
    if "CockroachDB" in version:
        return Finding("server version", True, version.split("(")[0].strip())
    number, text = _one(conn, "doctor_version")
    major = int(number) // 10000
    seen = f"PostgreSQL {text}"
    if major < SUPPORTED_POSTGRESQL:
        return Finding("server version", False, seen,
                       f"upgrade to PostgreSQL {SUPPORTED_POSTGRESQL} or newer: shardq's "
                       "schema and statements need it")
    return Finding("server version", True, seen)


def autovacuum(conn: Conn) -> Finding:
    """Whether autovacuum keeps shardq.tasks' dead rows down, and what holds it back."""
    server_on, options, live, dead, last = _one(conn, "doctor_autovacuum")
    if not server_on:
        return Finding("autovacuum", False, "autovacuum is off on this server",
                       "turn it on (autovacuum = on in postgresql.conf): every ack leaves a "
                       "dead row, and without vacuum claims step over ever more of them")
    if "autovacuum_enabled=false" in options:
        return Finding("autovacuum", False, "autovacuum is disabled for shardq.tasks",
                       "ALTER TABLE shardq.tasks RESET (autovacuum_enabled)")
    oldest = _one(conn, "doctor_oldest_snapshot")
    seen = f"{dead:,} dead and {live:,} live rows; last vacuum {last or 'never'}"
    if not oldest[2]:
        seen += (f"; other roles' transactions are hidden from role {oldest[3]}, so an old "
                 "one goes unseen here (an administrator can grant it pg_monitor)")
    if oldest[0] > OLD_XMIN_S:
        return Finding("autovacuum", False, seen + f"; a transaction open for "
                       f"{oldest[0] / 60:.0f} min (pid {oldest[1]}) holds back every vacuum",
                       "end it (SELECT pg_terminate_backend(pid)) and keep transactions "
                       "short: dead rows cannot be removed while it is open")
    if dead > DEAD_ROWS_BEHIND:
        return Finding("autovacuum", False, seen,
                       "autovacuum is not keeping up: raise autovacuum_max_workers or "
                       "lower autovacuum_naptime, and check for long transactions and "
                       "abandoned replication slots (pg_replication_slots) holding back xmin")
    return Finding("autovacuum", True, seen)


def index_bloat(conn: Conn, config: ClientConfig) -> Finding:
    """shardq.tasks' indexes that the vacuum step's rule calls bloated (the settings
    ``reindex_bloat_ratio`` and ``reindex_min_bytes``; see :func:`vacuum.bloated`)."""
    rows = conn.execute(sqlfiles.plain("index_bloat")).fetchall()
    over = vacuum.bloated(rows, config)
    seen = f"{len(rows)} indexes, {sum(r[1] for r in rows) / 2**20:.1f} MiB"
    if over:
        names = ", ".join(b.name for b in over)
        shown = "; ".join(f"{b.name} ({b.size / 2**20:.0f} MiB, ~{b.needed / 2**20:.0f} MiB "
                          "needed)" for b in over)
        return Finding("index bloat", False, seen + "; bloated: " + shown,
                       f"REINDEX INDEX CONCURRENTLY for each of {names} (no lock on "
                       "claims; the janitor's vacuum step does it where its role may), "
                       "and see that autovacuum keeps up")
    return Finding("index bloat", True, seen)


def maintenance(conn: Conn) -> Finding:
    """Whether this role may VACUUM and REINDEX shardq.tasks, as the janitor's vacuum step
    does (the table's owner; PostgreSQL 17+: or MAINTAIN on it)."""
    look = vacuum.look_at(conn)
    if not look.permitted:
        return Finding("janitor vacuum", False, vacuum.refusal(look).split(": ")[0],
                       "if the workers run as this role, their janitor cannot vacuum "
                       f"between autovacuum's runs: run the janitor as {look.owner}, or "
                       f"GRANT MAINTAIN ON shardq.tasks TO {look.role} (PostgreSQL 17+)")
    return Finding("janitor vacuum", True, f"role {look.role} may VACUUM and REINDEX "
                   "shardq.tasks: the janitor's vacuum step can run")


def connections(conn: Conn, client: Client, worker: WorkerConfig,
                pooler: Pooler | None = None) -> Finding:
    """A worker daemon's connections against the server's free ones, or against the pool
    of the pooler in front."""
    max_conn, reserved, used = _one(conn, "doctor_connections")
    per_process = max(client.config.pool_max_size, worker.connections) + int(worker.listen)
    daemon = per_process * worker.processes
    free = max_conn - reserved - used
    if pooler is not None:
        return pooled_connections(pooler, daemon, worker.processes, free)
    seen = (f"max_connections {max_conn} ({reserved} reserved), {used} in use; one "
            f"`shardq consume --processes {worker.processes}` opens up to {daemon}")
    if daemon > free:
        return Finding("pool size", False, seen,
                       f"only {free} connections are free: raise max_connections, or run "
                       "fewer --processes / --claimers, or put PgBouncer in front (then "
                       "--no-listen)")
    return Finding("pool size", True, seen + f"; {free // max(1, daemon)} such daemons fit")


def listen(client: Client, worker: WorkerConfig) -> Finding:
    """Whether LISTEN works: no transaction pooler in front, and a NOTIFY from another
    connection reaches it."""
    if not client.dialect.notify:
        return Finding("LISTEN/NOTIFY", True, f"not used on {client.dialect.name} (polling)")
    if client.db.transaction_pooled:
        seen = ("a transaction pooler is in front: a LISTEN stays on whichever server "
                "session ran it, and its notifications reach whoever runs there next")
        if not worker.listen:
            return Finding("LISTEN/NOTIFY", True, seen + "; workers poll (--no-listen)")
        return Finding("LISTEN/NOTIFY", False, seen,
                       "run workers with --no-listen --no-vacuum (SHARDQ_LISTEN=0, "
                       "SHARDQ_VACUUM=0; they refuse to start without them) and clients with "
                       "notify off (SHARDQ_NOTIFY=0), or point them at the server or a "
                       "session pool")
    dsn, timeout = client.db.dsn, client.config.connect_timeout_s
    with connect(dsn, timeout) as listener, connect(dsn, timeout) as sender:
        listener.execute(sqlfiles.plain("listen", channel=CHANNEL))
        token = uuid.uuid4().hex
        began = time.monotonic()
        sender.execute(sqlfiles.plain("notify_probe"), {"channel": CHANNEL, "payload": token})
        heard = any(n.payload == token for n in listener.notifies(timeout=NOTIFY_WAIT_S,
                                                                  stop_after=1))
        took = time.monotonic() - began
        listener.execute(sqlfiles.plain("unlisten", channel=CHANNEL))
    if not heard:
        return Finding("LISTEN/NOTIFY", False,
                       f"a NOTIFY did not arrive within {NOTIFY_WAIT_S:g} s",
                       "run workers with --no-listen (SHARDQ_LISTEN=0), or point them at the "
                       "server or a session-mode pool: LISTEN needs one session all along")
    return Finding("LISTEN/NOTIFY", True, f"a NOTIFY arrived in {took * 1000:.0f} ms")


def saturation(client: Client, samples: int = SATURATION_SAMPLES,
               gap_s: float = SATURATION_GAP_S) -> Finding:
    """Queues whose ``max_running`` is full while due tasks wait, in every one of
    ``samples`` looks ``gap_s`` apart: the limit, not the workers, sets their pace."""
    st = client.statements
    names = st.perform(plan(lambda: control.names(st)))
    found = st.perform(flow.controls(st, names)) if names else {}
    limited = sorted(q for q, c in found.items() if c.limits.max_running is not None)
    if not limited:
        return Finding("limits", True, "no queue has a max_running limit")
    always = set(limited)
    last: dict[str, QueueStats] = {}
    for i in range(samples):
        if i:
            time.sleep(gap_s)
        figures = st.perform(queuestats.many(st, sorted(always)))
        always = {f.queue for f in figures if f.saturated}
        last = {f.queue: f for f in figures}
        if not always:
            break
    seen = f"{len(limited)} queue(s) with max_running"
    if not always:
        return Finding("limits", True, seen + "; none saturated in every sample")
    over = "; ".join(f"{q} ({last[q].running}/{last[q].max_running} running, "
                     f"{last[q].available:,} due waiting)" for q in sorted(always))
    first = sorted(always)[0]
    return Finding("limits", False, seen + f"; saturated in all {samples} samples over "
                   f"{(samples - 1) * gap_s:.1f} s: {over}",
                   f"the limit sets the pace: raise it if what it protects allows (`shardq "
                   f"queue limit {first} --max-running N`), else expect the wait "
                   "(shardq_limit_wait_seconds)")


def examine(client: Client, worker: WorkerConfig,
            only: Collection[str] = CHECKS) -> list[Finding]:
    """Every check (of ``only``), in order; a check that fails to run is a finding of
    its own."""
    db = client.db
    pooler: Pooler | None = None
    findings = []
    if db.pooled and {"pooler", "pool size"} & set(only):
        try:
            pooler = look(db.dsn, db.transaction_pooled, client.config.connect_timeout_s)
            findings.append(pooler_check(client, pooler))
        except psycopg.Error as exc:
            findings.append(failed("pooler", exc))
    elif "pooler" in only:
        findings.append(pooler_check(client, None))
    checks: list[tuple[str, Callable[[Conn], Finding]]] = [
        ("server version", server_version),
        ("autovacuum", autovacuum),
        ("index bloat", lambda conn: index_bloat(conn, client.config)),
        ("janitor vacuum", maintenance),
        ("pool size", lambda conn: connections(conn, client, worker, pooler)),
    ]
    with connect(db.dsn, client.config.connect_timeout_s) as conn:
        cockroach = not client.dialect.notify and "CockroachDB" in str(
            _one(conn, "server_version")[0])
        for name, check in checks:
            if name not in only:
                continue
            if cockroach and name != "server version":
                # No vacuum (gc.ttlseconds collects MVCC garbage) and no max_connections.
                findings.append(Finding(name, True, "not applicable to CockroachDB"))
                continue
            findings.append(_guarded(name, functools.partial(check, conn)))
    if "LISTEN/NOTIFY" in only:
        findings.append(_guarded("LISTEN/NOTIFY", lambda: listen(client, worker)))
    if "limits" in only:
        findings.append(_guarded("limits", lambda: saturation(client)))
    return [f for f in findings if f.check in only]


def _guarded(name: str, check: Callable[[], Finding]) -> Finding:
    try:
        return check()
    except (psycopg.Error, ShardqError) as exc:
        return failed(name, exc)


def failed(name: str, exc: Exception) -> Finding:
    """A check that could not run, with advice for what its error means (a permission
    only when the server refused one)."""
    seen = f"the check failed: {str(exc).strip().splitlines()[0]}"
    cause = exc.__cause__ if isinstance(exc, ShardqError) and exc.__cause__ else exc
    if isinstance(cause, psycopg.errors.InsufficientPrivilege):
        return Finding(name, False, seen, "run doctor as a role that may read "
                       "pg_stat_activity and pg_stats (pg_monitor)")
    if is_lost_statement(cause):
        return Finding(name, False, seen, "a pooler in front lost a prepared statement: set "
                       "prepare off (SHARDQ_PREPARE=0)")
    return Finding(name, False, seen, "fix what the error says and run doctor again")
