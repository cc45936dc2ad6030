"""The statements layer: named SQL for one schema with shared parameters.

:class:`Statements` holds what every feature module needs to talk to the database:
the runner (with the schema's layout and dialect), the client's settings and the
clock.  Feature modules (:mod:`shardq.ops.produce`, :mod:`shardq.ops.settle`,
:mod:`shardq.ops.keys`, :mod:`shardq.loops.janitor`, :mod:`shardq.ops.deadletters`,
:mod:`shardq.ops.inspection`, :mod:`shardq.spark.merge`) take one of these, so each can
be used and tested without a :class:`shardq.Client`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from psycopg.rows import RowFactory

from shardq.core import sqlfiles
from shardq.core.adb import AsyncDatabase
from shardq.core.boundary import Layout
from shardq.core.clock import Clock, DatabaseClock
from shardq.core.config import ClientConfig
from shardq.core.db import Conn, Database
from shardq.core.dialect import Dialect
from shardq.core.plan import Execute, Fetch, Plan, single

T = TypeVar("T")
log = logging.getLogger("shardq")

def composed(layout: Layout, name: str, limit: int | None = None, *,
             fragments: Mapping[str, str | sqlfiles.Part] | None = None,
             identifiers: Mapping[str, tuple[str, ...]] | None = None) -> bytes:
    """Query ``name`` composed for a schema of ``layout``: the bytes the driver sends
    (see :func:`shardq.core.sqlfiles.query`).  ``shardq sql show`` prints them."""
    return sqlfiles.compiled(name, layout.dialect.name, layout.bucket_column, limit,
                             fragments=tuple(sorted((fragments or {}).items())),
                             identifiers=tuple(sorted((identifiers or {}).items())))


class Statements:
    """Composes named queries for one schema into requests (:meth:`fetch`,
    :meth:`execute`) that operations yield; blocking code may also run them at once
    (:meth:`all`, :meth:`one`, :meth:`perform`)."""

    def __init__(self, db: Database | AsyncDatabase, config: ClientConfig,
                 clock: Clock | None = None) -> None:
        self.db, self.config = db, config
        self.clock: Clock = clock or DatabaseClock()
        self._told_pooled = False

    @property
    def layout(self) -> Layout:
        """The schema's layout (dialect, bucket column and count)."""
        return self.db.layout

    @property
    def dialect(self) -> Dialect:
        """The engine the schema lives on."""
        return self.db.layout.dialect

    def listens(self) -> bool:
        """Whether calls that wait may LISTEN for what they wait for: PostgreSQL, with the
        setting ``notify`` on, and no transaction pooler in front, through which a LISTEN
        is left on whichever server session ran it (said once, the first time)."""
        if not (self.dialect.notify and self.config.notify):
            return False
        if self.db.transaction_pooled and not self._told_pooled:
            self._told_pooled = True
            log.warning("LISTEN cannot work through a transaction pooler: calls that wait "
                        "for results poll instead; set notify off (SHARDQ_NOTIFY=0) to "
                        "send no NOTIFY either")
        return not self.db.transaction_pooled

    @property
    def bucket_count(self) -> int:
        """How many buckets the schema has."""
        return self.db.layout.bucket_count

    def query(self, name: str, limit: int | None = None, *,
              fragments: Mapping[str, str | sqlfiles.Part] | None = None,
              identifiers: Mapping[str, tuple[str, ...]] | None = None) -> bytes:
        """Query ``name`` composed for this schema (see :func:`composed`)."""
        return composed(self.db.layout, name, limit, fragments=fragments,
                        identifiers=identifiers)

    def params(self, **values: Any) -> dict[str, Any]:
        """Bound parameters: "now" from the clock, the generation of the layout the
        statements are composed for (claims check it), the backoff settings and the
        attempts each task keeps, then ``values``."""
        c = self.config
        return {"now": self.clock.now(), "generation": self.db.layout.generation,
                "backoff_base_s": c.backoff_base_s,
                "backoff_cap_s": c.backoff_cap_s, "backoff_jitter": c.backoff_jitter,
                "attempts_kept": c.attempts_kept_per_task, **values}

    def fetch(self, query: str | bytes, values: Mapping[str, Any] | None = None, *,
              row_factory: RowFactory[Any] | None = None) -> Fetch:
        """The request of one statement (a query's name, or a composed query's bytes) with
        ``values``; its result is every row.  The parameters are made here, once, so a
        retried statement sends the same ones."""
        composed = self.query(query) if isinstance(query, str) else query
        return Fetch(composed, self.params(**(values or {})), row_factory)

    def execute(self, query: str | bytes, values: Mapping[str, Any] | None = None) -> Execute:
        """The request of one statement whose result is how many rows it changed."""
        composed = self.query(query) if isinstance(query, str) else query
        return Execute(composed, self.params(**(values or {})))

    # -- blocking use (the worker's loops and maintenance) -------------------------

    def blocking(self) -> Database:
        """The blocking runner; raises TypeError on an asyncio client's statements."""
        if not isinstance(self.db, Database):
            raise TypeError("a blocking statement on the statements of an AsyncClient")
        return self.db

    def perform(self, plan: Plan[T]) -> T:
        """Run ``plan`` with the blocking runner (see :meth:`Database.perform`)."""
        return self.blocking().perform(plan)

    def run(self, work: Callable[[Conn], T], conn: Conn | None = None) -> T:
        """Run ``work`` on a pooled connection with retries, or once on ``conn``."""
        return self.blocking().run(work, conn)

    def all(self, query: str | bytes, values: Mapping[str, Any] | None = None, *,
            conn: Conn | None = None, row_factory: RowFactory[Any] | None = None) -> list[Any]:
        """Every row of one statement (see :meth:`fetch`), run now, composed for the layout
        read again first when it is due."""
        if conn is None:
            self.blocking().follow_layout()
        return self.perform(single(self.fetch(query, values, row_factory=row_factory), conn))

    def one(self, query: str | bytes, values: Mapping[str, Any] | None = None, *,
            conn: Conn | None = None, row_factory: RowFactory[Any] | None = None) -> Any:
        """The first row of one statement, or None."""
        rows = self.all(query, values, conn=conn, row_factory=row_factory)
        return rows[0] if rows else None
