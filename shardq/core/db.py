"""The blocking runner: a pool of psycopg connections, and plans driven on them under a
deadline, with the retries and errors of :mod:`shardq.core.boundary`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool
from tenacity import Retrying

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
from shardq.core.copyio import EndThenWork
from shardq.core.deadline import Guard, Watchdog
from shardq.core.errors import is_connection_loss, is_lost_statement, is_read_only
from shardq.core.listen import Listener, Listeners
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
from shardq.core.pooler import behind_pooler, pools_transactions, stopped_preparing, threshold

T = TypeVar("T")
Conn = psycopg.Connection[Any]


def read_layout(conn: Conn) -> Layout:
    """The layout of the schema ``conn`` reaches (see :func:`layout_steps`)."""
    return drive(layout_steps(), conn, own=True)


def drive(steps: Steps[T], conn: Conn, *, own: bool) -> T:
    """Run an operation's generator on ``conn`` (``own``: a pooled connection), request by
    request; a request's error is raised at the operation's yield."""
    outcome = advance(steps)
    while not isinstance(outcome, Done):
        outcome = advance(steps, *_settled(outcome, conn, own))
    return outcome.value


def _settled(request: Request, conn: Conn, own: bool) -> tuple[Any, Exception | None]:
    try:
        return _perform(request, conn, own), None
    except Exception as exc:  # the operation's to catch, at its yield
        return None, exc


def _perform(request: Request, conn: Conn, own: bool) -> Any:
    if isinstance(request, Fetch):
        if request.row_factory is None:
            return conn.execute(request.query, request.params).fetchall()
        return conn.cursor(row_factory=request.row_factory).execute(
            request.query, request.params).fetchall()
    if isinstance(request, Execute):
        return conn.execute(request.query, request.params).rowcount
    if isinstance(request, CopyIn):  # the client's next work overlaps the server's writing
        cursor = conn.cursor()
        with cursor.copy(request.query, writer=EndThenWork(cursor, request.meanwhile)) as copy:
            copy.write(request.data)
        return None
    if isinstance(request, Listen | Wait):
        raise TypeError("a plan that waits runs detached: make it with wait_s")
    with conn.transaction() if own_block(conn, own=own) else nullcontext():
        return drive(request.steps(), conn, own=own)


def in_utc(conn: Conn) -> None:
    """Run a pooled connection's session in UTC, so every time shardq reads back is an
    aware datetime in UTC whatever the server's default zone.  psycopg gives a
    timestamptz the session's zone: a named one such as ``Etc/UTC`` cost a claim about
    0.7 µs more per task than ``UTC``.  A SET, not a startup option: transaction
    poolers such as PgBouncer refuse ``options`` but carry a client's TimeZone.  Never
    prepared: it runs once per connection."""
    if conn.info.parameter_status("TimeZone") != "UTC":
        conn.execute("SET TIME ZONE 'UTC'", prepare=False)


class Database:
    """A pool of autocommit connections and the one place statements are run.

    :meth:`run` gives each unit of work a deadline (``statement_timeout_s``: past it
    the connection is cut, see :mod:`shardq.core.deadline`), retries it as a whole where
    that is safe, and maps every database error onto shardq's hierarchy.
    """

    def __init__(self, dsn: str, *, max_size: int, connect_timeout_s: float = 5.0,
                 statement_timeout_s: float = 30.0, prepare: bool | None = None) -> None:
        self.dsn = normalize_dsn(dsn)
        self.connect_timeout_s, self.statement_timeout_s = connect_timeout_s, statement_timeout_s
        self._watchdog = Watchdog()
        self._cutoff: float | None = None
        self._bound_s: float | None = None  # set by fail_fast()
        self._unreachable = False  # a unit of work under fail_fast() did not reach the server
        self.listeners = Listeners(Listener, self.dsn, connect_timeout_s)
        # Connect once directly: a wrong address, password or database name then fails
        # at once with the server's own words, not after a pool's wait.
        self.pooled = False  # a pooler is in front (see shardq.core.pooler)
        self.layout = self._first_contact(connect_kwargs(connect_timeout_s))
        self.layout_watch = LayoutWatch()
        # A pooler that hands one client's transactions to different server sessions,
        # through which LISTEN cannot work.
        self.transaction_pooled = self.pooled and pools_transactions(self.dsn,
                                                                     connect_timeout_s)
        self.prepare_threshold = threshold(prepare, self.pooled)
        self.pool: ConnectionPool[Conn] = ConnectionPool(
            self.dsn, max_size=max_size, configure=in_utc, name="shardq",
            **pool_options(connect_timeout_s, statement_timeout_s, self.prepare_threshold))
        try:
            self.pool.open(wait=True, timeout=pool_open_timeout_s(connect_timeout_s))
        except psycopg.OperationalError as exc:
            self.pool.close()
            raise unavailable(self.dsn, exc) from exc

    @classmethod
    def for_config(cls, dsn: str, config: ClientConfig, *, max_size: int | None = None
                   ) -> Database:
        """A Database with ``config``'s pool size and timeouts."""
        return cls(dsn, max_size=max_size or config.pool_max_size,
                   connect_timeout_s=config.connect_timeout_s,
                   statement_timeout_s=config.statement_timeout_s, prepare=config.prepare)

    def _first_contact(self, kwargs: dict[str, Any]) -> Layout:
        try:
            with psycopg.connect(self.dsn, autocommit=True, **kwargs) as conn:
                layout = read_layout(conn)
                self.pooled = layout.dialect.name == "postgresql" and behind_pooler(conn)
                return layout
        except psycopg.Error as exc:
            raise first_contact_error(exc, self.dsn) from exc

    def _stop_preparing(self, cause: Exception) -> None:
        """A pooler lost a prepared statement: prepare none from now on (each connection
        is told as it is taken)."""
        if self.prepare_threshold is not None:
            self.prepare_threshold = None
            stopped_preparing(cause)

    def follow_layout(self) -> None:
        """Re-read the layout now if it is due (:class:`LayoutWatch`), before statements
        are composed for it; its own unit of work, with the usual retries."""
        if self.layout_watch.due(self.layout):
            self.layout = self.perform(Plan(lambda: follow_steps(self.layout)))

    def open_connections(self, count: int) -> None:
        """Keep ``count`` connections open (at most the pool's size), opening the missing
        ones now, side by side on the pool's worker threads, without waiting for them.

        A worker's claimers, completer, lease keeper and janitors each want a
        connection from their first step; grown on demand, the pool would open them
        one after the other while the first claims wait.
        """
        count = min(count, self.pool.max_size)
        if count > self.pool.min_size:
            self.pool.resize(count, self.pool.max_size)

    def finish_within(self, seconds: float) -> None:
        """Give up on any work (and retries) that would end later than ``seconds`` from
        now, work already under way included: for a shutdown that must end in time
        whatever the network does."""
        self._cutoff = time.monotonic() + seconds
        self._watchdog.cap(self._cutoff)

    def fail_fast(self, bound_s: float) -> None:
        """For a shutdown: every unit of work from now on, work under way included, ends
        within ``bound_s`` (its wait for a connection too); once one could not reach the
        server, the rest are not tried but fail at once with :class:`Unavailable`, and
        nothing is retried.  A shutdown then gives up on a database that does not answer
        in a bounded time, rather than spending its whole grace on it."""
        self._bound_s = bound_s
        self._watchdog.cap(time.monotonic() + bound_s)

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
            try:
                return self._attempt(work)
            except Exception as exc:
                if not retryable(exc, idempotent) or self._past_cutoff():
                    raise
            time.sleep(first_retry_wait_s())
            for attempt in Retrying(**retry_policy(idempotent, self._past_cutoff)):
                with attempt:
                    return self._attempt(work)
        except Exception as exc:
            mapped = translate(exc, self.dsn)
            if mapped is exc:
                raise
            raise mapped from exc
        raise AssertionError("unreachable: tenacity reraises the last error")

    def perform(self, plan: Plan[T]) -> T:
        """Run ``plan``: on a pooled connection with :meth:`run`'s deadline and retries, or
        once on the caller's own connection; a plan that waits, detached (see
        :class:`~shardq.core.plan.Plan`)."""
        if plan.wait_s:
            return self._detached(plan)
        own = plan.conn is None
        return self.run(lambda conn: drive(plan.steps(), conn, own=own), plan.conn,
                        idempotent=plan.idempotent)

    def _detached(self, plan: Plan[T]) -> T:
        steps = plan.steps()
        kept: list[tuple[Listener, str, threading.Event]] = []
        try:
            outcome = advance(steps)
            while not isinstance(outcome, Done):
                try:
                    result, error = self._step(outcome, kept, plan.idempotent), None
                except Exception as exc:  # the operation's to catch, at its yield
                    result, error = None, exc
                outcome = advance(steps, result, error)
            return outcome.value
        finally:
            steps.close()
            for listener, payload, event in kept:
                listener.unsubscribe(payload, event)

    def _step(self, request: Request, kept: list[tuple[Listener, str, threading.Event]],
              idempotent: bool) -> Any:
        """One request of a detached plan: a statement on a connection of its own, or a
        subscription or a wait on the client's listener, on no connection."""
        if isinstance(request, Listen):
            listener = self.listeners.on(request.channel)
            kept.append((listener, request.payload, listener.subscribe(request.payload)))
            return None
        if isinstance(request, Wait):
            event = next((e for listener, payload, e in kept
                          if (listener.channel, payload) == (request.channel, request.payload)),
                         None)
            if event is None:
                time.sleep(request.timeout_s)
                return False
            heard = event.wait(request.timeout_s)
            event.clear()  # before the plan looks again: what comes after is kept
            return heard
        return self.perform(alone(request, idempotent=idempotent))

    def _past_cutoff(self) -> bool:
        return self._unreachable or (self._cutoff is not None
                                     and time.monotonic() >= self._cutoff)

    def _timeouts(self) -> tuple[float, float]:
        """How long to wait for a connection, and the deadline of the work itself."""
        wait, deadline = self.pool.timeout, self.statement_timeout_s
        if self._bound_s is not None:
            wait, deadline = min(wait, self._bound_s), min(deadline, self._bound_s)
        if self._cutoff is not None:
            left = max(0.01, self._cutoff - time.monotonic())
            wait, deadline = min(wait, left), min(deadline, left)
        return wait, deadline

    def _take(self, wait: float) -> Conn:
        """A pooled connection, preparing statements as this runner does now."""
        try:
            conn = self.pool.getconn(timeout=wait)
        except psycopg.OperationalError as exc:  # PoolTimeout included
            if self._bound_s is not None:
                self._unreachable = True
            raise NotSent("no connection") from exc
        if conn.prepare_threshold != self.prepare_threshold:
            conn.prepare_threshold = self.prepare_threshold
        return conn

    def _attempt(self, work: Callable[[Conn], T]) -> T:
        if self._unreachable:
            raise NotSent("the database did not answer within the shutdown's bound")
        wait, deadline = self._timeouts()
        conn = self._take(wait)
        guard: Guard | None = None
        try:
            with self._watchdog.guard(conn, deadline) as guard:
                if self.layout_watch.due(self.layout):  # a reshard may have switched it
                    self.layout = drive(follow_steps(self.layout), conn, own=True)
                return work(conn)
        except psycopg.Error as exc:
            failure = self._failed(exc, conn, guard is not None and guard.cut, deadline)
            if failure is exc:
                raise
            raise failure from exc
        finally:
            if guard is not None and guard.cut:
                conn.close()  # cut, perhaps after the work ended: never hand it out again
            self.pool.putconn(conn)

    def _failed(self, exc: psycopg.Error, conn: Conn, cut: bool, deadline: float
                ) -> Exception:
        """What a failure of work on ``conn`` means (``cut``: by its deadline), and what
        it tells of the pool's other connections."""
        if isinstance(exc, psycopg.OperationalError):
            if self._bound_s is not None and (is_connection_loss(exc) or cut):
                self._unreachable = True
            if cut:
                return overran(deadline)
            if is_connection_loss(exc):
                # The server may have gone (a restart ends every connection): replace
                # the idle ones too rather than hand them out to fail one by one.
                self.pool.drain()
        elif is_lost_statement(exc):
            self._stop_preparing(exc)
        elif is_read_only(exc):
            # A standby now (a switchover): every connection to it is of no use.
            conn.close()
            self.pool.drain()
        return exc

    def close(self) -> None:
        """Close every pooled connection (within what is left of a :meth:`finish_within`)."""
        wait = self.connect_timeout_s
        if self._cutoff is not None:
            wait = min(wait, max(0.1, self._cutoff - time.monotonic()))
        for listener in self.listeners.made.values():
            listener.close()
        self.pool.close(timeout=wait)

