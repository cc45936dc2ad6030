"""The asyncio runner of plans: a pool of psycopg ``AsyncConnection`` s and the retry,
deadline and error boundary of :class:`shardq.core.db.Database`, awaited.

Operations are the same plans the blocking runner drives (:mod:`shardq.core.plan`);
only the way a request reaches the server differs: each request is awaited, so an
event loop serves its other tasks while a statement is in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool
from tenacity import AsyncRetrying

from shardq.core.boundary import (
    Layout,
    LayoutWatch,
    NotSent,
    connect_kwargs,
    first_contact_error,
    first_retry_wait_s,
    follow_steps,
    layout_steps,
    normalize_dsn,
    overran,
    pool_open_timeout_s,
    pool_options,
    retry_policy,
    retryable,
    translate,
    unavailable,
)
from shardq.core.config import ClientConfig
from shardq.core.errors import is_connection_loss, is_lost_statement, is_read_only
from shardq.core.listen import AsyncListener, Listeners
from shardq.core.plan import (
    CopyIn,
    Done,
    Execute,
    Fetch,
    Listen,
    Plan,
    Request,
    Steps,
    Wait,
    advance,
    alone,
    own_block,
)
from shardq.core.pooler import (
    behind_pooler_async,
    pools_transactions,
    stopped_preparing,
    threshold,
)

T = TypeVar("T")
AConn = psycopg.AsyncConnection[Any]


async def in_utc(conn: AConn) -> None:
    """Run a pooled connection's session in UTC (see :func:`shardq.core.db.in_utc`)."""
    if conn.info.parameter_status("TimeZone") != "UTC":
        await conn.execute("SET TIME ZONE 'UTC'", prepare=False)


async def drive(steps: Steps[T], conn: AConn, *, own: bool) -> T:
    """Run an operation's generator on ``conn``, awaiting each request (see
    :func:`shardq.core.db.drive`)."""
    outcome = advance(steps)
    while not isinstance(outcome, Done):
        outcome = advance(steps, *await _settled(outcome, conn, own))
    return outcome.value


async def _settled(request: Request, conn: AConn, own: bool) -> tuple[Any, Exception | None]:
    try:
        return await _perform(request, conn, own), None
    except Exception as exc:  # the operation's to catch, at its yield
        return None, exc


async def _perform(request: Request, conn: AConn, own: bool) -> Any:
    if isinstance(request, Fetch):
        cursor = conn.cursor(row_factory=request.row_factory) if request.row_factory \
            else conn.cursor()
        return await (await cursor.execute(request.query, request.params)).fetchall()
    if isinstance(request, Execute):
        return (await conn.execute(request.query, request.params)).rowcount
    if isinstance(request, CopyIn):  # no overlap here: the loop serves others meanwhile
        async with conn.cursor().copy(request.query) as copy:
            await copy.write(request.data)
        request.meanwhile()
        return None
    if isinstance(request, Listen | Wait):
        raise TypeError("a plan that waits runs detached: make it with wait_s")
    if not own_block(conn, own=own):
        return await drive(request.steps(), conn, own=own)
    async with conn.transaction():
        return await drive(request.steps(), conn, own=own)


class AsyncDatabase:
    """A pool of asyncio connections and the one place an async client's plans run.

    Made without I/O; :meth:`open` connects (first directly, so that a wrong address,
    password or database fails at once with the server's own words), reads the schema's
    layout, and opens the pool.
    """

    def __init__(self, dsn: str, *, max_size: int, connect_timeout_s: float = 5.0,
                 statement_timeout_s: float = 30.0, prepare: bool | None = None) -> None:
        self.dsn = normalize_dsn(dsn)
        self.connect_timeout_s, self.statement_timeout_s = connect_timeout_s, statement_timeout_s
        self.max_size = max_size
        self.prepare = prepare
        self.pooled = False  # a pooler is in front (see shardq.core.pooler), read by open()
        self.transaction_pooled = False  # and it pools transactions (see Database)
        self.prepare_threshold: int | None = None
        self._turns = asyncio.Semaphore(max_size)
        self._layout: Layout | None = None
        self.layout_watch = LayoutWatch()
        self.pool: AsyncConnectionPool[AConn] | None = None
        self.listeners = Listeners(AsyncListener, self.dsn, connect_timeout_s)

    @classmethod
    def for_config(cls, dsn: str, config: ClientConfig) -> AsyncDatabase:
        """An AsyncDatabase with ``config``'s pool size and timeouts."""
        return cls(dsn, max_size=config.pool_max_size, connect_timeout_s=config.connect_timeout_s,
                   statement_timeout_s=config.statement_timeout_s, prepare=config.prepare)

    @property
    def layout(self) -> Layout:
        """The schema's layout, read by :meth:`open`."""
        if self._layout is None:
            raise RuntimeError("the AsyncDatabase is not open: use `async with` or open()")
        return self._layout

    @layout.setter
    def layout(self, layout: Layout) -> None:
        self._layout = layout

    async def open(self) -> None:
        """Connect, read the layout and open the pool."""
        kwargs = connect_kwargs(self.connect_timeout_s)
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True, **kwargs)
            async with conn:
                self._layout = await drive(layout_steps(), conn, own=True)
                self.pooled = (self._layout.dialect.name == "postgresql"
                               and await behind_pooler_async(conn))
        except psycopg.Error as exc:
            raise first_contact_error(exc, self.dsn) from exc
        if self.pooled:  # two connections of its own, in a thread: once per client
            self.transaction_pooled = await asyncio.to_thread(
                pools_transactions, self.dsn, self.connect_timeout_s)
        self.prepare_threshold = threshold(self.prepare, self.pooled)
        self.pool = AsyncConnectionPool(
            self.dsn, max_size=self.max_size, configure=in_utc, name="shardq-async",
            **pool_options(self.connect_timeout_s, self.statement_timeout_s,
                           self.prepare_threshold))
        try:
            await self.pool.open(wait=True, timeout=pool_open_timeout_s(self.connect_timeout_s))
        except psycopg.OperationalError as exc:
            await self.pool.close()
            raise unavailable(self.dsn, exc) from exc

    async def follow_layout(self) -> None:
        """Re-read the layout now if it is due, before statements are composed for it (as
        the blocking runner's :meth:`~shardq.core.db.Database.follow_layout`)."""
        if self.layout_watch.due(self.layout):
            self._layout = await self.perform(Plan(lambda: follow_steps(self.layout)))

    async def perform(self, plan: Plan[T]) -> T:
        """Run ``plan`` on a pooled connection with retries, or once on its own ``conn``
        (see :meth:`shardq.core.db.Database.run` for what is retried); a plan that waits,
        detached (see :class:`~shardq.core.plan.Plan`)."""
        if plan.wait_s:
            return await self._detached(plan)
        try:
            if plan.conn is not None:
                return await drive(plan.steps(), plan.conn, own=False)
            try:
                return await self._attempt(plan)
            except Exception as exc:
                if not retryable(exc, plan.idempotent):
                    raise
            await asyncio.sleep(first_retry_wait_s())
            async for attempt in AsyncRetrying(**retry_policy(plan.idempotent)):
                with attempt:
                    return await self._attempt(plan)
        except Exception as exc:
            mapped = translate(exc, self.dsn)
            if mapped is exc:
                raise
            raise mapped from exc
        raise AssertionError("unreachable: tenacity reraises the last error")

    async def _detached(self, plan: Plan[T]) -> T:
        steps = plan.steps()
        kept: list[tuple[AsyncListener, str, asyncio.Event]] = []
        try:
            outcome = advance(steps)
            while not isinstance(outcome, Done):
                try:
                    result, error = await self._step(outcome, kept, plan.idempotent), None
                except Exception as exc:  # the operation's to catch, at its yield
                    result, error = None, exc
                outcome = advance(steps, result, error)
            return outcome.value
        finally:
            steps.close()
            for listener, payload, event in kept:
                listener.unsubscribe(payload, event)

    async def _step(self, request: Request,
                    kept: list[tuple[AsyncListener, str, asyncio.Event]],
                    idempotent: bool) -> Any:
        """One request of a detached plan (see :meth:`shardq.core.db.Database._step`)."""
        if isinstance(request, Listen):
            listener = self.listeners.on(request.channel)
            kept.append((listener, request.payload, await listener.subscribe(request.payload)))
            return None
        if isinstance(request, Wait):
            event = next((e for listener, payload, e in kept
                          if (listener.channel, payload) == (request.channel, request.payload)),
                         None)
            if event is None:
                await asyncio.sleep(request.timeout_s)
                return False
            try:
                async with asyncio.timeout(request.timeout_s):
                    await event.wait()
            except TimeoutError:
                return False
            event.clear()  # before the plan looks again: what comes after is kept
            return True
        return await self.perform(alone(request, idempotent=idempotent))

    async def _connection(self, pool: AsyncConnectionPool[AConn]) -> AConn:
        """A pooled connection, once one of ``max_size`` turns is free.

        Callers beyond the pool's size queue here, on one semaphore, rather than each in
        the pool's own wait (a task, a timer and a condition per caller): a thousand
        calls started at once then cost the loop a fraction of that.  Only a caller that
        finds every turn taken waits under the pool's timeout.
        """
        if self._turns.locked():
            async with asyncio.timeout(pool.timeout):
                await self._turns.acquire()
        else:
            await self._turns.acquire()
        try:
            return await pool.getconn(timeout=pool.timeout)
        except BaseException:
            self._turns.release()
            raise

    async def _attempt(self, plan: Plan[T]) -> T:
        pool = self.pool
        if pool is None:
            raise RuntimeError("the AsyncDatabase is not open: use `async with` or open()")
        try:
            conn = await self._connection(pool)
        except (psycopg.OperationalError, TimeoutError) as exc:  # PoolTimeout included
            raise NotSent("no connection") from exc
        if conn.prepare_threshold != self.prepare_threshold:
            conn.prepare_threshold = self.prepare_threshold
        try:
            async with asyncio.timeout(self.statement_timeout_s):
                if self.layout_watch.due(self.layout):  # a reshard may have switched it
                    self._layout = await drive(follow_steps(self.layout), conn, own=True)
                return await drive(plan.steps(), conn, own=True)
        except TimeoutError as exc:
            await conn.close()  # mid-statement: never hand it out again
            raise overran(self.statement_timeout_s + plan.wait_s) from exc
        except psycopg.Error as exc:
            await self._failed(exc, conn, pool)
            raise
        finally:
            await pool.putconn(conn)
            self._turns.release()

    async def _failed(self, exc: psycopg.Error, conn: AConn, pool: AsyncConnectionPool[AConn]
                      ) -> None:
        """What a failure of work on ``conn`` tells of the pool's other connections (as the
        blocking runner's ``_failed``)."""
        if isinstance(exc, psycopg.OperationalError):
            if is_connection_loss(exc):
                # A server gone ends every connection: the idle ones are replaced too
                # rather than handed out to fail one by one.
                await pool.drain()
        elif is_lost_statement(exc):
            if self.prepare_threshold is not None:
                # Prepare none from now on (see shardq.core.pooler).
                self.prepare_threshold = None
                stopped_preparing(exc)
        elif is_read_only(exc):
            # A standby now (a switchover): every connection to it is of no use.
            await conn.close()
            await pool.drain()

    async def close(self) -> None:
        """Close every pooled connection, and the listening one."""
        for listener in self.listeners.made.values():
            await listener.close()
        if self.pool is not None:
            await self.pool.close(timeout=self.connect_timeout_s)
