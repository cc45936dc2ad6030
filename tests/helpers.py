"""What many tests need: claiming everything, waiting for a condition, reading rows, the
bucket formula, a free TCP port, checking sampled counts, running the CLI, an in-process
worker."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import psycopg
from psycopg import sql

import shardq
from shardq.core.config import ClientConfig
from shardq.core.dialect import POSTGRESQL
from shardq.ops import settle
from shardq.ops.results import Kept
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker


def claim_all(client: shardq.Client, queue: str, *, most: int | None = None,
              limit: int = 1000, lease_s: float | None = None,
              worker_id: UUID | None = None) -> list[shardq.Task]:
    """Claim every eligible task of ``queue`` (or only ``most`` of them), bucket by bucket,
    for the worker ``worker_id``.

    Each bucket is claimed from, ``limit`` tasks a statement, until a claim comes back
    short: a claim takes from one bucket only, so this is what "claim them all" means.
    """
    tasks: list[shardq.Task] = []
    for bucket in range(client.bucket_count):
        while most is None or len(tasks) < most:
            step = limit if most is None else min(limit, most - len(tasks))
            got = client.claim_bucket(queue, bucket, limit=step, lease_s=lease_s,
                                      worker_id=worker_id)
            tasks += got
            if len(got) < step:
                break
    return tasks


def wait_for(check: Callable[[], bool], timeout: float = 60, interval: float = 0.1,
             what: str = "the condition") -> None:
    """Return as soon as ``check()`` is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(interval)


def wait_for_lock_wait(conn: psycopg.Connection[Any], timeout: float = 10) -> None:
    """Return once a session of ``conn``'s database waits on a lock (a row lock, or a
    unique index entry of a transaction not yet committed)."""
    wait_for(lambda: bool(scalar(conn, "SELECT count(*) FROM pg_stat_activity "
                                       "WHERE datname = current_database() "
                                       "AND wait_event_type = 'Lock'")),
             timeout=timeout, interval=0.02, what="a session to wait on a lock")


def in_threads(*calls: Callable[[], object]) -> list[BaseException]:
    """Run each call in a thread of its own, all at once; once all ended, what they raised."""
    errors: list[BaseException] = []

    def guarded(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def query(target: str | psycopg.Connection[Any], text: Any,
          params: Any = None) -> list[tuple[Any, ...]]:
    """Every row of one statement, on a connection or on a new one to the URL ``target``."""
    if isinstance(target, str):
        with psycopg.connect(target) as conn:
            return conn.execute(text, params).fetchall()
    return target.execute(text, params).fetchall()


def scalar(target: str | psycopg.Connection[Any], text: Any, params: Any = None) -> Any:
    """The one value that one statement returns."""
    [(value,)] = query(target, text, params)
    return value


def live_rows_counted(conn: psycopg.Connection[Any], most: int) -> None:
    """Wait until the statistics count at most ``most`` live rows of shardq.tasks.

    PostgreSQL 14 and older send their counts to a collector process, which publishes
    them up to half a second later; 15 and newer count in shared memory at once."""
    def counted() -> bool:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT n_live_tup FROM pg_stat_user_tables "
                           "WHERE relid = 'shardq.tasks'::regclass").fetchone()
        return row is not None and int(row[0]) <= most

    wait_for(counted, timeout=30, what=f"the statistics to count at most {most} live rows")


RESHARDED = int(os.environ.get("SHARDQ_TEST_RESHARDED") or 0) or None
"""The bucket count every test database made with the default count is resharded to
(``SHARDQ_TEST_RESHARDED``: see tests/conftest.py), or None."""
TEST_BUCKETS = RESHARDED or 16
"""The bucket count of such a database."""


def bucket_of(task_id: UUID, bucket_count: int = TEST_BUCKETS) -> int:
    """The bucket PostgreSQL computes for ``task_id`` (the library's one formula) in a
    schema of ``bucket_count`` buckets (by default the test databases')."""
    bucket = POSTGRESQL.bucket_of(task_id, bucket_count)
    assert bucket is not None  # PostgreSQL's bucket is a function of the id alone
    return bucket


def with_dbname(url: str, dbname: str) -> str:
    """The URL ``url`` naming database ``dbname`` instead (the query string is kept)."""
    return urlunsplit(urlsplit(url)._replace(path="/" + dbname))


def with_user(url: str, user: str, password: str) -> str:
    """The URL ``url`` logging in as ``user`` with ``password``."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the kernel picks it: bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class TickingClock(shardq.ManualClock):
    """A manual clock that also moves one microsecond each time it is read, so that each
    statement stamps the rows it changes with a time of its own."""

    def now(self) -> datetime:
        """The manual time, one microsecond later than the last reading."""
        return self.advance(1e-6)


def within_stated_error(real: int, state: str, *figures: Any) -> bool:
    """Whether one of these queue figures (each from a page sample of its own, which
    starts at random) counts ``real`` tasks in ``state`` within its stated error.  That
    error is three standard errors, so by design about one estimate in 300 falls outside
    it; two independent ones both doing so would be a wrong estimate or a wrong error."""
    return any(abs(f[state] - real) <= f["error"].get(state, 0) for f in figures)


def shardq_cli(*args: str, dsn: str | None = None, env: dict[str, str] | None = None,
               check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``shardq ARGS`` in a child process (``SHARDQ_DSN`` set to ``dsn`` if given)."""
    extra = {**(env or {}), **({"SHARDQ_DSN": dsn} if dsn else {})}
    return subprocess.run([sys.executable, "-m", "shardq", *args], capture_output=True,
                          text=True, timeout=120, check=check, env={**os.environ, **extra})


def one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    """The command failed as the CLI promises: exit 2, one ``shardq: `` line naming
    ``words``, no traceback."""
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr, result
    assert result.stderr.startswith("shardq: "), result
    assert result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def worker_for(dsn: str, app: shardq.App, **settings: Any) -> Worker:
    """An in-process worker of ``app`` with no janitor and no LISTEN (``lease_s`` goes to
    its client, the rest to its WorkerConfig)."""
    client_settings = {k: settings.pop(k) for k in list(settings) if k in ("lease_s",)}
    return Worker(app, ClientConfig(dsn=dsn, **client_settings),
                  WorkerConfig(janitors=0, listen=False, **settings))


def expire_leases(client: shardq.Client, queue: str) -> list[shardq.Task]:
    """Claim every task of ``queue`` and let the leases run out unsettled, as when the worker
    holding them died; the janitor puts them back.  No sleep: a locked task's lease ends
    at its ``exec_time``, which is moved into the past (and the backoff the rescue adds is
    the client's)."""
    claimed = [t for b in range(client.bucket_count) for t in client.claim_bucket(queue, b)]
    assert client.config.dsn is not None
    with psycopg.connect(client.config.dsn, autocommit=True) as conn:
        conn.execute("UPDATE shardq.tasks SET exec_time = now() - interval '1 s' "
                     "WHERE queue = %s AND status = 'locked'", (queue,))
    assert client.run_janitor_once().rescued == len(claimed)
    return claimed



def ack_keeping(client: shardq.Client, tasks: list[shardq.Task], values: list[Any]) -> None:
    """Ack ``tasks`` with ``values`` kept as their results, as a worker keeps the result of
    a flow's task (until its flow ends)."""
    st = client.statements
    st.perform(settle.ack(st, tasks, [Kept(json.dumps(v), None, float("inf")) for v in values]))


def rows(conn: psycopg.Connection[Any], table: str) -> int:
    """How many rows ``shardq.TABLE`` holds."""
    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("shardq", table))
    return int(conn.execute(query).fetchone()[0])  # type: ignore[index]
