"""The statements layer: named SQL run against one schema with shared parameters.

:class:`Statements` holds what every feature module needs to talk to the database:
the connection pool, the schema's layout and dialect, the client's settings and
the clock.  Feature modules (:mod:`shardq.ops.produce`, :mod:`shardq.ops.settle`,
:mod:`shardq.ops.keys`, :mod:`shardq.ops.janitor`, :mod:`shardq.ops.deadletters`,
:mod:`shardq.ops.inspection`, :mod:`shardq.spark.merge`) take one of these, so each can
be used and tested without a :class:`shardq.Client`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from psycopg.rows import RowFactory

from shardq.core import sqlfiles
from shardq.core.clock import Clock, DatabaseClock
from shardq.core.config import ClientConfig
from shardq.core.db import Conn, Database, Layout
from shardq.core.dialect import Dialect

T = TypeVar("T")


class Statements:
    """Composes named queries for one schema and runs them through its :class:`Database`."""

    def __init__(self, db: Database, config: ClientConfig, clock: Clock | None = None) -> None:
        self.db, self.config = db, config
        self.clock: Clock = clock or DatabaseClock()

    @property
    def layout(self) -> Layout:
        """The schema's layout (dialect, bucket column and count)."""
        return self.db.layout

    @property
    def dialect(self) -> Dialect:
        """The engine the schema lives on."""
        return self.db.layout.dialect

    @property
    def bucket_count(self) -> int:
        """How many buckets the schema has."""
        return self.db.layout.bucket_count

    def query(self, name: str, limit: int | None = None, *,
              fragments: Mapping[str, str] | None = None,
              identifiers: Mapping[str, tuple[str, ...]] | None = None) -> bytes:
        """Query ``name`` composed for this schema (see :func:`shardq.core.sqlfiles.query`)."""
        layout = self.db.layout
        return sqlfiles.compiled(name, layout.dialect.name, layout.bucket_column, limit,
                              fragments=tuple(sorted((fragments or {}).items())),
                              identifiers=tuple(sorted((identifiers or {}).items())))

    def params(self, **values: Any) -> dict[str, Any]:
        """Bound parameters: "now" from the clock and the backoff settings, then ``values``."""
        c = self.config
        return {"now": self.clock.now(), "backoff_base_s": c.backoff_base_s,
                "backoff_cap_s": c.backoff_cap_s, "backoff_jitter": c.backoff_jitter, **values}

    def run(self, work: Callable[[Conn], T], conn: Conn | None = None) -> T:
        """Run ``work`` on a pooled connection with retries, or once on ``conn``."""
        return self.db.run(work, conn)

    def all(self, query: str | bytes, values: Mapping[str, Any] | None = None, *,
            conn: Conn | None = None, row_factory: RowFactory[Any] | None = None) -> list[Any]:
        """Every row of one statement (a query's name, or a composed query's bytes) with
        ``values``.

        The parameters are made once, so a retried statement sends the same ones.
        """
        composed = self.query(query) if isinstance(query, str) else query
        params = self.params(**(values or {}))

        def work(c: Conn) -> list[Any]:
            cursor = c.cursor(row_factory=row_factory) if row_factory else c.cursor()
            return cursor.execute(composed, params).fetchall()

        return self.run(work, conn)

    def one(self, query: str | bytes, values: Mapping[str, Any] | None = None, *,
            conn: Conn | None = None, row_factory: RowFactory[Any] | None = None) -> Any:
        """The first row of one statement, or None."""
        rows = self.all(query, values, conn=conn, row_factory=row_factory)
        return rows[0] if rows else None
