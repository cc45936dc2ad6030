"""The asyncio client: :class:`AsyncClient`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from shardq.api import Operations, resolve
from shardq.api.operation import AsyncRunner
from shardq.core import embedded
from shardq.core.adb import AsyncDatabase
from shardq.core.boundary import first_contact_error
from shardq.core.clock import Clock
from shardq.core.config import ClientConfig
from shardq.core.errors import SchemaNotReady
from shardq.core.plan import Plan
from shardq.ops import reshard
from shardq.ops.reshard import ReshardStatus, Step

T = TypeVar("T")


class AsyncClient(Operations, AsyncRunner):
    """:class:`shardq.Client`'s calls as coroutines, on psycopg's asyncio pool.

    ``async with shardq.AsyncClient(dsn) as client:`` opens it (or ``await
    client.open()``, then ``await client.close()``); its settings are the Client's.
    ``conn=`` takes a psycopg ``AsyncConnection``, so a task joins the caller's async
    transaction.  Every call is written once for both clients (see :mod:`shardq.api`),
    so they validate, retry and answer alike.
    """

    def __init__(self, dsn: str | None = None, *, config: ClientConfig | None = None,
                 clock: Clock | None = None, **settings: Any) -> None:
        self.config = resolve(dsn, config, settings)
        self._clock = clock
        self.db: AsyncDatabase | None = None

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes not set yet: those that opening sets.
        if name in ("statements", "clock"):
            raise RuntimeError("the AsyncClient is not open: use `async with` or open()")
        raise AttributeError(f"'AsyncClient' object has no attribute {name!r}")

    async def open(self) -> AsyncClient:
        """Connect (the embedded PostgreSQL when no database is named); returns self."""
        if self.db is None:
            self.db = await _connect(self.config)
            try:
                self._ready(self.db, self._clock)
            except BaseException:
                await self.db.close()
                self.db = None
                raise
        return self

    async def perform(self, plan: Plan[T]) -> T:
        """Run an operation's plan (see :mod:`shardq.core.plan`) and return its value."""
        if self.db is None:
            raise RuntimeError("the AsyncClient is not open: use `async with` or open()")
        if plan.around is None:
            return await self.db.perform(plan)
        with plan.around:  # a span's bounds: nothing in it blocks
            return await self.db.perform(plan)

    async def follow_layout(self) -> None:
        """Re-read the schema's layout if it is due (see :class:`AsyncRunner`)."""
        if self.db is None:
            raise RuntimeError("the AsyncClient is not open: use `async with` or open()")
        await self.db.follow_layout()

    async def close(self) -> None:
        """Release the client's connections."""
        if self.db is not None:
            await self.db.close()

    async def reshard(self, bucket_count: int, *,
                      on_step: Callable[[Step], object] | None = None,
                      stop: asyncio.Event | None = None) -> ReshardStatus:
        """:meth:`shardq.Client.reshard`, awaited: the steps run on an asyncio
        connection of their own, and the waits between them are the event loop's."""
        stop = stop or asyncio.Event()
        st = self.statements
        db = self.db
        assert db is not None  # statements are set once it is open
        reshard.require_session(db.transaction_pooled)
        try:
            conn = await psycopg.AsyncConnection.connect(
                db.dsn, **reshard.session_options(self.config.connect_timeout_s))
        except psycopg.Error as exc:
            raise first_contact_error(exc, db.dsn) from exc
        async with conn:
            await self.perform(reshard.lock(st, conn))
            try:
                contended = 0
                while not stop.is_set():
                    done = await self.perform(reshard.step(st, bucket_count, conn))
                    if on_step is not None:
                        on_step(done)
                    if done.switched:  # this client's own calls follow at once
                        db.layout_watch.expire()
                    if done.done:
                        break
                    contended = contended + 1 if done.contended else 0
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), reshard.pause_s(done, contended))
            finally:  # a lost session gave its lock back already
                if not conn.broken:
                    await self.perform(reshard.unlock(st, conn))
        return await self.perform(reshard.status(st))

    async def __aenter__(self) -> AsyncClient:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _connect(config: ClientConfig) -> AsyncDatabase:
    """The database the settings name, or the embedded one (started, and migrated on
    first use, in a thread: starting a server blocks)."""
    if config.dsn:
        embedded.note_named(config.dsn)
    dsn = config.dsn if config.dsn else await asyncio.to_thread(embedded.ensure_started)
    db = AsyncDatabase.for_config(dsn, config)
    try:
        await db.open()
    except SchemaNotReady:
        if config.dsn:
            raise
        await asyncio.to_thread(embedded.migrate, dsn, config.bucket_count)
        await db.open()
    return db
