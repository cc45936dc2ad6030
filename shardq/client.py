"""The blocking client: :class:`Client`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from shardq.api import Operations, resolve
from shardq.api.operation import SyncRunner
from shardq.core import embedded
from shardq.core.boundary import first_contact_error
from shardq.core.clock import Clock
from shardq.core.config import ClientConfig
from shardq.core.db import Database
from shardq.core.errors import SchemaNotReady
from shardq.core.plan import Plan
from shardq.loops.janitor import Janitor, JanitorReport, janitor_pass
from shardq.ops import history, reshard
from shardq.ops.history import Minute
from shardq.ops.reshard import ReshardStatus, Step

T = TypeVar("T")


class Client(Operations, SyncRunner):
    """A connection to one shardq schema: enqueue, claim, settle and inspect tasks.

    ``Client()`` with no DSN and no ``SHARDQ_DSN`` uses the embedded PostgreSQL
    (started on first use, schema applied).  Settings not given as keywords come
    from ``SHARDQ_*`` environment variables, then :class:`ClientConfig` defaults.
    A Client is thread-safe; close it (or use ``with``) to release its connections.
    Its calls are :class:`shardq.AsyncClient`'s, blocking.
    """

    def __init__(self, dsn: str | None = None, *, config: ClientConfig | None = None,
                 clock: Clock | None = None, **settings: Any) -> None:
        self.config = resolve(dsn, config, settings)
        self.db = _connect(self.config)
        try:
            self._ready(self.db, clock)
        except BaseException:
            self.db.close()
            raise

    def perform(self, plan: Plan[T]) -> T:
        """Run an operation's plan (see :mod:`shardq.core.plan`) and return its value."""
        if plan.around is None:
            return self.db.perform(plan)
        with plan.around:
            return self.db.perform(plan)

    def follow_layout(self) -> None:
        """Re-read the schema's layout if it is due (see :class:`SyncRunner`)."""
        self.db.follow_layout()

    def close(self) -> None:
        """Release the client's connections."""
        self.db.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- blocking only: history and the janitor ---------------------------------

    def throughput(self, queue: str | None = None, *, minutes: int = 60) -> list[Minute]:
        """Tasks enqueued and completed per minute over the last ``minutes`` (at most 60),
        of ``queue`` or of every queue, the current minute last."""
        return self.perform(history.series(self.statements, queue, minutes))

    def reshard(self, bucket_count: int, *, on_step: Callable[[Step], object] | None = None,
                stop: threading.Event | None = None) -> ReshardStatus:
        """Change the schema's bucket count to ``bucket_count`` while workers, producers
        and Spark writers run on (PostgreSQL; see :mod:`shardq.ops.reshard`), and return
        the layout when done.  ``on_step`` is told each step; setting ``stop`` ends the
        call between two steps.  A reshard cut anywhere carries on when called again,
        and a call with the count in use before it rolls it back."""
        stop = stop or threading.Event()
        st = self.statements
        reshard.require_session(self.db.transaction_pooled)
        try:
            conn = psycopg.connect(self.db.dsn,
                                   **reshard.session_options(self.config.connect_timeout_s))
        except psycopg.Error as exc:
            raise first_contact_error(exc, self.db.dsn) from exc
        with conn:
            self.perform(reshard.lock(st, conn))
            try:
                contended = 0
                while not stop.is_set():
                    done = self.perform(reshard.step(st, bucket_count, conn))
                    if on_step is not None:
                        on_step(done)
                    if done.switched:  # this client's own calls follow at once
                        self.db.layout_watch.expire()
                    if done.done:
                        break
                    contended = contended + 1 if done.contended else 0
                    stop.wait(reshard.pause_s(done, contended))
            finally:  # a lost session gave its lock back already
                if not conn.broken:
                    self.perform(reshard.unlock(st, conn))
        return self.perform(reshard.status(st))

    def run_janitor_once(self) -> JanitorReport:
        """One janitor pass over every bucket: promote due head starts, rescue expired leases."""
        return janitor_pass(self.statements)

    def janitor(self, interval_s: float | None = None) -> Janitor:
        """A :class:`Janitor` loop for this client's schema (start it with ``.start()``)."""
        return Janitor(self.statements, interval_s)


def _connect(config: ClientConfig) -> Database:
    """The database the settings name, or the embedded one (started, and migrated on
    first use)."""
    if config.dsn:
        embedded.note_named(config.dsn)
        return Database.for_config(config.dsn, config)
    dsn = embedded.ensure_started()
    try:
        return Database.for_config(dsn, config)
    except SchemaNotReady:
        embedded.migrate(dsn, config.bucket_count)
        return Database.for_config(dsn, config)
