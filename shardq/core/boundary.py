"""What both runners share: the schema's layout and how it is read, connection and pool
options, and the boundary around a unit of work — which failures may run it again, how
it is retried, and how a failure becomes one of shardq's errors.

:mod:`shardq.core.db` (blocking) and :mod:`shardq.core.adb` (asyncio) differ only in how
a request reaches the server; everything here they use alike.
"""

from __future__ import annotations

import getpass
import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential
from tenacity.stop import stop_base

from shardq.core import dialect, sqlfiles
from shardq.core.dialect import Dialect
from shardq.core.errors import (
    ConfigError,
    ConnectionLost,
    PermissionDenied,
    SchemaNotReady,
    ShardqError,
    Unavailable,
    is_connection_loss,
    is_lost_statement,
    is_transient,
    map_db_error,
)
from shardq.core.plan import Fetch, Steps
from shardq.core.redaction import redact

log = logging.getLogger("shardq")

RETRY_ATTEMPTS = 6
FIRST_RETRY_WAIT_S = 0.1
LAYOUT_CHECK_S = 1.0
"""How old a runner's layout may grow before a unit of work re-reads it first (one
probe of the one-row ``shardq.layout``): a reshard's switch reaches every client
within about this long."""


@dataclass(frozen=True)
class Layout:
    """What the schema in the database looks like to shardq: its engine, the bucket
    statements name (a column, or :func:`shardq.core.dialect.expression_bucket`), how
    many buckets there are, and the generation of ``shardq.layout`` this was read at
    (``tracked``: that table exists, so a reshard may change the layout)."""

    dialect: Dialect
    bucket_column: str
    bucket_count: int
    generation: int = 0
    tracked: bool = False


def normalize_dsn(dsn: str) -> str:
    """A libpq DSN: ``cockroachdb://`` (accepted for clarity) is spoken as postgresql://."""
    scheme, sep, rest = dsn.partition("://")
    if sep and scheme.startswith("cockroachdb"):
        return "postgresql://" + rest
    return dsn


def layout_steps() -> Steps[Layout]:
    """Find the server's dialect, and the bucket column and count of the tasks table, or
    raise SchemaNotReady (the steps of both runners' first contact)."""
    rows = yield Fetch(sqlfiles.plain("server_version"))
    found = dialect.from_version(str(rows[0][0]) if rows else "")
    rows = yield Fetch(sqlfiles.text("schema_info", found.name), {})
    if not rows and found.name == "postgresql":
        # information_schema shows a role only what it has privileges on: a schema the
        # role may not use looks missing, and deserves the grant, not `shardq migrate`.
        access = yield Fetch(sqlfiles.plain("schema_access"))
        if access:
            owner, role, usage, reads = access[0]
            if not (usage and reads):
                raise PermissionDenied(
                    "permission denied for schema shardq" if not usage else
                    "permission denied for table shardq.tasks", str(role),
                    f"as {owner} (the schema's owner), run `shardq migrate --grants {role}` "
                    "(`--read-only`: reads only, as for a dashboard)")
    columns = {str(r[0]): str(r[1]) for r in rows}
    if columns.pop("layout", None) is None:  # a schema from before migration 0029
        column, count = found.bucket_column(columns)
        return Layout(found, column, count)
    return (yield from follow_steps(Layout(found, "", 0, generation=-1, tracked=True)))


def follow_steps(layout: Layout) -> Steps[Layout]:
    """The layout ``shardq.layout`` says is in use now: ``layout`` itself while its
    generation is current, else one read at the new generation."""
    rows = yield Fetch(sqlfiles.plain("layout_read"))
    if not rows:
        raise SchemaNotReady("the table shardq.layout is empty: run `shardq migrate`")
    count, expression, generation = rows[0]
    if generation == layout.generation:
        return layout
    return Layout(layout.dialect, layout.dialect.layout_bucket(count, expression), count,
                  generation, tracked=True)


class LayoutWatch:
    """When a runner's layout is due a re-read (:data:`LAYOUT_CHECK_S`): never for a
    schema without ``shardq.layout``; :meth:`due` answers yes to one caller only, who
    reads it (its unit of work runs :func:`follow_steps` first)."""

    def __init__(self) -> None:
        self._read_at = time.monotonic()

    def due(self, layout: Layout) -> bool:
        """Whether ``layout`` is to be re-read now (then not again for a while)."""
        now = time.monotonic()
        if not layout.tracked or now - self._read_at < LAYOUT_CHECK_S:
            return False
        self._read_at = now
        return True

    def expire(self) -> None:
        """Re-read the layout before the next unit of work (a reshard switched it)."""
        self._read_at = float("-inf")


def role_of(dsn: str) -> str | None:
    """The role a DSN logs in as: its ``user``, else libpq's default (``PGUSER``, else the
    operating system's user name); None if none can be told."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        user = conninfo_to_dict(normalize_dsn(dsn)).get("user") or os.environ.get("PGUSER")
        return str(user or getpass.getuser())
    except (psycopg.ProgrammingError, KeyError, OSError):  # no passwd entry for this uid
        return None


def connect_kwargs(connect_timeout_s: float) -> dict[str, Any]:
    """Connection options both runners pass: libpq takes whole seconds, and treats less
    than 2 as 2."""
    return {"connect_timeout": max(2, math.ceil(connect_timeout_s))}


def pool_options(connect_timeout_s: float, statement_timeout_s: float,
                 prepare_threshold: int | None = 0) -> dict[str, Any]:
    """The options both runners make their pool with (besides its name, size and
    ``configure``): opened by the runner, with :func:`pool_open_timeout_s`."""
    return {
        "min_size": 1,
        # Every statement is prepared on its first run on a connection, not its fifth
        # (psycopg's default): shardq sends few distinct statements, each many times,
        # and a janitor's per-bucket statements reach a connection about once a second
        # each, so they were parsed and planned afresh for a worker's first minute.  A
        # drain of 50k tasks ran 1.2x as fast.  None (nothing prepared) behind a pooler
        # that cannot carry prepared statements: see shardq.core.pooler.
        "kwargs": {"autocommit": True, "prepare_threshold": prepare_threshold,
                   **connect_kwargs(connect_timeout_s)},
        "open": False,
        "timeout": connect_timeout_s + statement_timeout_s,
    }


def pool_open_timeout_s(connect_timeout_s: float) -> float:
    """How long opening a pool waits for its first connection."""
    return connect_timeout_s + 1


def unavailable(dsn: str, why: BaseException) -> Unavailable:
    """No connection to ``dsn`` could be made, for ``why`` (every password masked)."""
    return Unavailable(f"cannot connect to {redact(dsn)}: {connection_cause(why, dsn)}")


def connection_cause(exc: BaseException, dsn: str) -> str:
    """Why a connection to ``dsn`` failed: libpq's first line, and for a server
    certificate that its CA file did not vouch for, which file that was."""
    first = cause(exc)
    if "certificate verify failed" in first:
        from psycopg.conninfo import conninfo_to_dict

        try:
            rootcert = conninfo_to_dict(normalize_dsn(dsn)).get("sslrootcert")
        except psycopg.ProgrammingError:
            rootcert = None
        rootcert = rootcert or os.environ.get("PGSSLROOTCERT") or "~/.postgresql/root.crt"
        first += (f" (the server's certificate is not signed by a CA in sslrootcert="
                  f"{rootcert}: is that the CA of this server?)")
    return first


def first_contact_error(exc: psycopg.Error, dsn: str) -> ShardqError:
    """What a failed first connection means: a DSN libpq cannot read, a server it cannot
    reach, or a database error (a missing schema, say)."""
    if isinstance(exc, psycopg.ProgrammingError):
        return ConfigError(f"invalid DSN {redact(dsn)}: {cause(exc)}")
    if isinstance(exc, psycopg.OperationalError):
        return unavailable(dsn, exc)
    return map_db_error(exc, role_of(dsn))


def retryable(exc: BaseException, idempotent: bool) -> bool:
    """Whether a failed unit of work may run again: nothing was sent, the server rolled it
    back (40001), or the connection was lost (or a pooler lost a prepared statement, so
    that the statement did not run but those before it in the plan may have) and
    running it twice is harmless."""
    if isinstance(exc, NotSent) or is_transient(exc):
        return True
    return idempotent and (is_connection_loss(exc) or is_lost_statement(exc))


def first_retry_wait_s() -> float:
    """How long to wait before the first retry: at random up to 0.1 s."""
    return random.uniform(0, FIRST_RETRY_WAIT_S)


def retry_policy(idempotent: bool, past_cutoff: Callable[[], bool] = lambda: False
                 ) -> dict[str, Any]:
    """The tenacity arguments both runners retry a unit of work with, once its first
    attempt failed and :func:`first_retry_wait_s` passed.

    The first attempt runs outside tenacity: a retrying object per call left dozens of
    objects in reference cycles, which only the cyclic collector frees, and its full
    collections held a busy event loop for tens of milliseconds.  Failures are rare,
    so a retrying object is made only for them.  Jittered exponential waits double from
    the first one, up to 2 s; RETRY_ATTEMPTS attempts in all.
    """
    return {"retry": retry_if_exception(lambda exc: retryable(exc, idempotent)),
            "stop": stop_after_attempt(RETRY_ATTEMPTS - 1) | stop_when(past_cutoff),
            "wait": wait_random_exponential(multiplier=FIRST_RETRY_WAIT_S, max=2.0),
            "reraise": True}


def translate(exc: Exception, dsn: str) -> Exception:
    """A unit of work's failure as shardq's error; ``exc`` itself when it is not a
    database's (a shardq error the work raised, say).  A runner re-raises ``exc`` as it
    is then: ``raise exc from exc`` would make it its own cause and lose the one it had.
    """
    if isinstance(exc, ShardqError):
        return exc
    if isinstance(exc, NotSent):
        return unavailable(dsn, exc.__cause__ or exc)
    if isinstance(exc, psycopg.Error):
        if is_connection_loss(exc):
            return ConnectionLost(f"connection lost: {cause(exc)}")
        return map_db_error(exc, role_of(dsn))
    return exc


def overran(deadline_s: float) -> DeadlineExceeded:
    """The failure of a unit of work that overran its deadline of ``deadline_s`` and
    whose connection was dropped (logged: the deadline may be too short)."""
    log.warning("a statement overran its deadline of %.1fs: connection dropped", deadline_s)
    return DeadlineExceeded(f"the statement overran its deadline of {deadline_s:.1f}s "
                            "(statement_timeout_s): connection dropped")


class DeadlineExceeded(psycopg.OperationalError):
    """A unit of work overran its deadline and its connection was cut (a lost connection,
    as far as retries go: whether the server applied it is unknown)."""


class NotSent(Exception):
    """No connection could be had, so nothing was sent: the work may simply run again."""


class stop_when(stop_base):
    """A tenacity stop condition from a plain predicate."""

    def __init__(self, predicate: Callable[[], bool]) -> None:
        self.predicate = predicate

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.predicate()


def cause(exc: BaseException) -> str:
    """The first line of a driver error: libpq's own words, without its hints."""
    text = str(exc).strip()
    return redact(text.splitlines()[0] if text else type(exc).__name__)
