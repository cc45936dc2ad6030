"""The connection pool, engine detection, and the retry/error boundary around statements."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from shardq.core import dialect, sqlfiles
from shardq.core.config import ClientConfig
from shardq.core.deadline import Guard, Watchdog
from shardq.core.dialect import Dialect
from shardq.core.errors import (
    ConfigError,
    ConnectionLost,
    ShardqError,
    Unavailable,
    is_connection_loss,
    is_transient,
    map_db_error,
)
from shardq.core.redaction import redact

log = logging.getLogger("shardq")

T = TypeVar("T")
Conn = psycopg.Connection[Any]

RETRY_ATTEMPTS = 6


@dataclass(frozen=True)
class Layout:
    """What the schema in the database looks like to shardq."""

    dialect: Dialect
    bucket_column: str
    bucket_count: int


def normalize_dsn(dsn: str) -> str:
    """A libpq DSN: ``cockroachdb://`` (accepted for clarity) is spoken as postgresql://."""
    scheme, sep, rest = dsn.partition("://")
    if sep and scheme.startswith("cockroachdb"):
        return "postgresql://" + rest
    return dsn


def detect_dialect(conn: psycopg.Connection[Any]) -> Dialect:
    """The server's dialect, from its version string."""
    row = conn.execute(sqlfiles.plain("server_version")).fetchone()
    return dialect.from_version(str(row[0]) if row else "")


def read_layout(conn: psycopg.Connection[Any]) -> Layout:
    """Find the bucket column and count of the tasks table, or raise SchemaNotReady."""
    found = detect_dialect(conn)
    rows = conn.execute(sqlfiles.text("schema_info", found.name), {}).fetchall()
    column, count = found.bucket_column({str(r[0]): str(r[1]) for r in rows})
    return Layout(found, column, count)


class DeadlineExceeded(psycopg.OperationalError):
    """A unit of work overran its deadline and its connection was cut (a lost connection,
    as far as retries go: whether the server applied it is unknown)."""


class NotSent(Exception):
    """No connection could be had, so nothing was sent: the work may simply run again."""


def in_utc(conn: Conn) -> None:
    """Run a pooled connection's session in UTC, so every time shardq reads back is an
    aware datetime in UTC whatever the server's default zone.  psycopg gives a
    timestamptz the session's zone: a named one such as ``Etc/UTC`` cost a claim about
    0.7 µs more per task than ``UTC``.  A SET, not a startup option: transaction
    poolers such as PgBouncer refuse ``options`` but carry a client's TimeZone."""
    if conn.info.parameter_status("TimeZone") != "UTC":
        conn.execute("SET TIME ZONE 'UTC'")


class Database:
    """A pool of autocommit connections and the one place statements are run.

    :meth:`run` gives each unit of work a deadline (``statement_timeout_s``: past it
    the connection is cut, see :mod:`shardq.core.deadline`), retries it as a whole where
    that is safe, and maps every database error onto shardq's hierarchy.
    """

    def __init__(self, dsn: str, *, max_size: int, connect_timeout_s: float = 5.0,
                 statement_timeout_s: float = 30.0) -> None:
        self.dsn = normalize_dsn(dsn)
        self.connect_timeout_s, self.statement_timeout_s = connect_timeout_s, statement_timeout_s
        self._watchdog = Watchdog()
        self._cutoff: float | None = None
        # libpq takes whole seconds and treats less than 2 as 2.
        connect_kwargs: dict[str, Any] = {"connect_timeout": max(2, math.ceil(connect_timeout_s))}
        # Connect once directly: a wrong address, password or database name then fails
        # at once with the server's own words, not after a pool's wait.
        self.layout = self._first_contact(connect_kwargs)
        self.pool: ConnectionPool[Conn] = ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=max_size,
            # Every statement is prepared on its first run on a connection, not its
            # fifth (psycopg's default): shardq sends few distinct statements, each
            # many times, and a janitor's per-bucket statements reach a connection
            # about once a second each, so they were parsed and planned afresh for a
            # worker's first minute.  A drain of 50k tasks ran 1.2x as fast.
            kwargs={"autocommit": True, "prepare_threshold": 0, **connect_kwargs},
            configure=in_utc,
            open=False,
            name="shardq",
            timeout=connect_timeout_s + statement_timeout_s,
        )
        try:
            self.pool.open(wait=True, timeout=connect_timeout_s + 1)
        except psycopg.OperationalError as exc:
            self.pool.close()
            raise Unavailable(f"cannot connect to {redact(self.dsn)}: {_cause(exc)}") from exc

    @classmethod
    def for_config(cls, dsn: str, config: ClientConfig, *, max_size: int | None = None
                   ) -> Database:
        """A Database with ``config``'s pool size and timeouts."""
        return cls(dsn, max_size=max_size or config.pool_max_size,
                   connect_timeout_s=config.connect_timeout_s,
                   statement_timeout_s=config.statement_timeout_s)

    def _first_contact(self, connect_kwargs: dict[str, Any]) -> Layout:
        try:
            with psycopg.connect(self.dsn, autocommit=True, **connect_kwargs) as conn:
                return read_layout(conn)
        except ShardqError:
            raise
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"invalid DSN {redact(self.dsn)}: {_cause(exc)}") from exc
        except psycopg.OperationalError as exc:
            raise Unavailable(f"cannot connect to {redact(self.dsn)}: {_cause(exc)}") from exc
        except psycopg.Error as exc:
            raise map_db_error(exc) from exc

    def finish_within(self, seconds: float) -> None:
        """Give up on any work (and retries) that would end later than ``seconds`` from
        now, work already under way included: for a shutdown that must end in time
        whatever the network does."""
        self._cutoff = time.monotonic() + seconds
        self._watchdog.cap(self._cutoff)

    def run(self, work: Callable[[Conn], T], conn: Conn | None = None, *,
            idempotent: bool = True) -> T:
        """Run ``work`` on a pooled connection under a deadline, retried when that is safe.

        Serialization failures and failures to get a connection (nothing was sent)
        are retried.  A connection lost while ``work`` ran leaves its outcome unknown:
        it is retried only when ``idempotent`` (running it again cannot apply it
        twice); otherwise it raises :class:`ConnectionLost`.  With ``conn`` (the
        caller's own connection and transaction) the work runs there once: a retry
        would have to replay the caller's transaction.
        """
        try:
            if conn is not None:
                return work(conn)
            for attempt in Retrying(
                retry=retry_if_exception(lambda exc: self._retryable(exc, idempotent)),
                stop=stop_after_attempt(RETRY_ATTEMPTS) | stop_when(self._past_cutoff),
                wait=wait_random_exponential(multiplier=0.05, max=2.0),
                reraise=True,
            ):
                with attempt:
                    return self._attempt(work)
        except ShardqError:
            raise
        except NotSent as exc:
            cause = exc.__cause__
            raise Unavailable(f"cannot connect to {redact(self.dsn)}: "
                              f"{_cause(cause) if cause else exc}") from cause
        except psycopg.Error as exc:
            if is_connection_loss(exc):
                raise ConnectionLost(f"connection lost: {_cause(exc)}") from exc
            raise map_db_error(exc) from exc
        raise AssertionError("unreachable: tenacity reraises the last error")

    def _retryable(self, exc: BaseException, idempotent: bool) -> bool:
        if isinstance(exc, NotSent) or is_transient(exc):
            return True
        return idempotent and is_connection_loss(exc)

    def _past_cutoff(self) -> bool:
        return self._cutoff is not None and time.monotonic() >= self._cutoff

    def _timeouts(self) -> tuple[float, float]:
        """How long to wait for a connection, and the deadline of the work itself."""
        wait, deadline = self.pool.timeout, self.statement_timeout_s
        if self._cutoff is not None:
            left = max(0.01, self._cutoff - time.monotonic())
            wait, deadline = min(wait, left), min(deadline, left)
        return wait, deadline

    def _attempt(self, work: Callable[[Conn], T]) -> T:
        wait, deadline = self._timeouts()
        try:
            conn = self.pool.getconn(timeout=wait)
        except psycopg.OperationalError as exc:  # PoolTimeout included
            raise NotSent("no connection") from exc
        guard: Guard | None = None
        try:
            with self._watchdog.guard(conn, deadline) as guard:
                return work(conn)
        except psycopg.OperationalError as exc:
            if guard is not None and guard.cut:
                log.warning("a statement overran its deadline of %.1fs: connection dropped",
                            deadline)
                raise DeadlineExceeded(f"the statement overran its deadline of {deadline:.1f}s "
                                       "(statement_timeout_s): connection dropped") from exc
            if is_connection_loss(exc):
                # The server may have gone (a restart ends every connection): replace
                # the idle ones too rather than hand them out to fail one by one.
                self.pool.drain()
            raise
        finally:
            if guard is not None and guard.cut:
                conn.close()  # cut, perhaps after the work ended: never hand it out again
            self.pool.putconn(conn)

    def close(self) -> None:
        """Close every pooled connection (within what is left of a :meth:`finish_within`)."""
        wait = self.connect_timeout_s
        if self._cutoff is not None:
            wait = min(wait, max(0.1, self._cutoff - time.monotonic()))
        self.pool.close(timeout=wait)


class stop_when(stop_base):
    """A tenacity stop condition from a plain predicate."""

    def __init__(self, predicate: Callable[[], bool]) -> None:
        self.predicate = predicate

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.predicate()


def _cause(exc: BaseException) -> str:
    """The first line of a driver error: libpq's own words, without its hints."""
    text = str(exc).strip()
    return redact(text.splitlines()[0] if text else type(exc).__name__)
