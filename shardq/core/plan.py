"""Operations as plans: the statements an operation needs, with no I/O of their own.

Each database operation of shardq is written once, as a generator that *yields
requests* (run this statement, copy these rows in, do these steps in one transaction)
and *receives their results*; a request that fails has its error raised at the
``yield``, where the operation may catch it.  A :class:`Plan` wraps such a generator
with what a runner needs to know: where to run it and whether running it again after
a lost reply is safe.

Two runners drive plans: :class:`shardq.core.db.Database` on psycopg's blocking
connections (the :class:`shardq.Client`, the worker) and
:class:`shardq.core.adb.AsyncDatabase` on its asyncio connections (the
:class:`shardq.AsyncClient`).  They differ only in how a request reaches the server;
what an operation sends, in which order, how it validates, retries and reads rows is
the generator's, so the two clients cannot drift apart.  This is the shape psycopg
itself uses internally (its connection logic is generators that yield what they wait
for).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import RowFactory

T = TypeVar("T")
Query: TypeAlias = str | bytes | sql.SQL | sql.Composed
Params: TypeAlias = Mapping[str, Any] | Sequence[Any] | None


@dataclass(frozen=True, slots=True)
class Fetch:
    """Run one statement; its result is every row it returned."""

    query: Query
    params: Params = None
    row_factory: RowFactory[Any] | None = None


@dataclass(frozen=True, slots=True)
class Execute:
    """Run one statement; its result is how many rows it changed."""

    query: Query
    params: Params = None


def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class CopyIn:
    """``COPY … FROM STDIN`` with ``data`` (in the statement's format); its result is None.

    ``meanwhile`` runs once the data is sent: a runner that can, runs it while the
    server writes the rows (see :mod:`shardq.core.copyio`), else right after.
    """

    query: Query
    data: bytes
    meanwhile: Callable[[], object] = _nothing


@dataclass(frozen=True, slots=True)
class Atomic(Generic[T]):
    """Run ``steps`` all or nothing; the result is what they return.

    On a pooled connection that is a transaction of its own; on a caller's connection,
    a savepoint inside the caller's transaction (see :func:`own_block`).
    """

    steps: Callable[[], Steps[T]]


@dataclass(frozen=True, slots=True)
class Listen:
    """Keep, for this plan's :class:`Wait` requests, the notifications on ``channel``
    whose payload is ``payload``, from now until the plan ends; the result is None.

    The runner subscribes on its client's listener (:mod:`shardq.core.listen`): one
    connection that LISTENs for every call of the client, so no pooled connection
    ever listens."""

    channel: str
    payload: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait up to ``timeout_s`` for a notification on ``channel`` whose payload is
    ``payload``, kept since an earlier :class:`Listen` of the plan or the last Wait; the
    result is whether one came.  With ``channel`` None (an engine without LISTEN, or
    ``notify`` off), or when the client cannot listen, just wait.  A plan that waits
    holds no connection meanwhile (see :attr:`Plan.wait_s`); an asyncio runner awaits,
    so its event loop serves others."""

    timeout_s: float
    channel: str | None = None
    payload: str | None = None


Request: TypeAlias = Fetch | Execute | CopyIn | Listen | Wait | Atomic[Any]
Steps: TypeAlias = Generator[Request, Any, T]
"""An operation's generator: it yields requests, is sent their results, returns T."""


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """One operation, ready to run: ``steps`` makes a fresh generator for each attempt.

    ``conn`` is the caller's own connection (a psycopg ``Connection`` for the sync
    client, an ``AsyncConnection`` for the async one): the plan then runs there, once,
    inside the caller's transaction.  Otherwise it runs on a pooled connection and is
    retried after a serialization failure, or after a lost connection when
    ``idempotent`` (running it again cannot apply it twice).  ``wait_s`` is how long
    its :class:`Wait` requests may take in all: a plan that waits (``wait_s`` above 0)
    runs *detached*, each statement on a pooled connection taken for it alone (and
    retried alone, under the same rule), its waits on no connection at all, so that
    calls waiting at the same time never starve the others of the pool.  ``around`` is
    a context the client runs the plan in, retries and all: an enqueue's span when a
    tracer is installed (:mod:`shardq.core.tracing`).
    """

    steps: Callable[[], Steps[T]]
    conn: Any = None
    idempotent: bool = True
    wait_s: float = 0.0
    around: AbstractContextManager[object] | None = None


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """An operation's generator has returned ``value``."""

    value: T


def advance(steps: Steps[T], result: Any = None,
            error: BaseException | None = None) -> Request | Done[T]:
    """Give the generator the last request's result (or raise its error at the yield);
    returns the next request, or :class:`Done` with the operation's value.  The one
    place both runners step an operation."""
    try:
        return steps.throw(error) if error is not None else steps.send(result)
    except StopIteration as stop:
        return Done(stop.value)


def plan(steps: Callable[[], Steps[T]], conn: Any = None, *,
         idempotent: bool = True, wait_s: float = 0.0) -> Plan[T]:
    """A :class:`Plan` of ``steps`` (a generator function of no arguments)."""
    return Plan(steps, conn, idempotent, wait_s)


def single(request: Fetch, conn: Any = None) -> Plan[list[Any]]:
    """A plan of one statement whose value is its rows."""
    def steps() -> Steps[list[Any]]:
        rows: list[Any] = yield request
        return rows

    return Plan(steps, conn)


def alone(request: Request, *, idempotent: bool) -> Plan[Any]:
    """A plan of one request whose value is its result: a step of a detached plan."""
    def steps() -> Steps[Any]:
        return (yield request)

    return Plan(steps, idempotent=idempotent)


def done(value: T) -> Plan[T]:
    """A plan that sends nothing and returns ``value`` (an operation with nothing to do)."""
    def steps() -> Steps[T]:
        return value
        yield  # a generator that yields nothing

    return Plan(steps)


def own_block(conn: Any, *, own: bool) -> bool:
    """Whether an :class:`Atomic` request opens a block (transaction or savepoint).

    On a pooled connection (``own``), an autocommit one, or inside a transaction the
    caller opened, it does.  On a caller's connection outside autocommit with no
    transaction open yet, psycopg's ``transaction()`` would begin and commit one of its
    own behind the caller's back: there the steps join the transaction that psycopg
    opens implicitly, which the caller commits or rolls back.  The same rule for both
    drivers' connections (their ``autocommit`` and ``info`` read alike).
    """
    return own or bool(conn.autocommit) or conn.info.transaction_status != TransactionStatus.IDLE
