"""The connection pool, engine detection, and the retry/error boundary around statements."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from shardq import sqlfiles
from shardq.errors import SchemaNotReady, ShardqError, is_retryable, map_db_error

log = logging.getLogger("shardq")

T = TypeVar("T")
Conn = psycopg.Connection[Any]

RETRY_ATTEMPTS = 6


@dataclass(frozen=True)
class Layout:
    """What the schema in the database looks like to shardq."""

    dialect: str
    bucket_column: str
    bucket_count: int


def normalize_dsn(dsn: str) -> str:
    """A libpq DSN: ``cockroachdb://`` (accepted for clarity) is spoken as postgresql://."""
    scheme, sep, rest = dsn.partition("://")
    if sep and scheme.startswith("cockroachdb"):
        return "postgresql://" + rest
    return dsn


def redact(dsn: str) -> str:
    """The DSN with any password replaced, for logs and messages."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password=)\S+", r"\1***", dsn)


def detect_dialect(conn: psycopg.Connection[Any]) -> str:
    """'cockroachdb' or 'postgresql', from the server's version string."""
    row = conn.execute("SELECT version()").fetchone()
    return "cockroachdb" if row and "CockroachDB" in str(row[0]) else "postgresql"


_COUNT_IN_EXPR = re.compile(r"(\d+)\)*\s*$")
_COUNT_IN_SHARD = re.compile(r"_shard_(\d+)$")


def read_layout(conn: psycopg.Connection[Any]) -> Layout:
    """Find the bucket column and count of the tasks table, or raise SchemaNotReady."""
    dialect = detect_dialect(conn)
    rows = conn.execute(sqlfiles.text("schema_info", dialect), {}).fetchall()
    columns = {str(r[0]): str(r[1]) for r in rows}
    if dialect == "postgresql" and "bucket" in columns:
        match = _COUNT_IN_EXPR.search(columns["bucket"])
        if match:
            return Layout(dialect, "bucket", int(match.group(1)))
    if dialect == "cockroachdb":
        shards = [c for c in columns if _COUNT_IN_SHARD.search(c)]
        if len(shards) == 1:
            match = _COUNT_IN_SHARD.search(shards[0])
            assert match is not None
            return Layout(dialect, shards[0], int(match.group(1)))
        if len(shards) > 1:
            raise SchemaNotReady(
                f"shardq.tasks has several shard columns {sorted(shards)} "
                "(a bucket-count change is in progress)"
            )
    raise SchemaNotReady("the table shardq.tasks does not exist")


class Database:
    """A pool of autocommit connections and the one place statements are run.

    :meth:`run` retries the whole unit of work on serialization failures and
    lost connections, and maps every database error onto shardq's hierarchy.
    """

    def __init__(self, dsn: str, *, max_size: int) -> None:
        self.dsn = normalize_dsn(dsn)
        self.pool: ConnectionPool[Conn] = ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": True},
            open=False,
            name="shardq",
        )
        self.pool.open(wait=True, timeout=30)
        try:
            self.layout = self.run(read_layout)
        except BaseException:
            self.pool.close()
            raise

    def run(self, work: Callable[[Conn], T], conn: Conn | None = None) -> T:
        """Run ``work`` on a pooled connection, retried as a whole when that is safe.

        With ``conn`` (the caller's own connection and transaction) the work runs
        there once: a retry would have to replay the caller's transaction.
        """
        try:
            if conn is not None:
                return work(conn)
            for attempt in Retrying(
                retry=retry_if_exception(is_retryable),
                stop=stop_after_attempt(RETRY_ATTEMPTS),
                wait=wait_random_exponential(multiplier=0.05, max=2.0),
                reraise=True,
            ):
                with attempt, self.pool.connection() as pooled:
                    return work(pooled)
        except ShardqError:
            raise
        except psycopg.Error as exc:
            raise map_db_error(exc) from exc
        raise AssertionError("unreachable: tenacity reraises the last error")

    def close(self) -> None:
        """Close every pooled connection."""
        self.pool.close()
