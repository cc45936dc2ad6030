"""What stands between shardq and the server: a connection pooler such as PgBouncer.

A pooler answers each client with a process id of its own making (the BackendKeyData
that routes a cancel request), where a server session answers ``pg_backend_pid()``
with its own: the two differ only when something sits in between, whatever its mode.

Prepared statements: psycopg prepares a statement on a connection under a name
(``_pg3_0``, ...) and from then on sends only the name.  A transaction pooler hands each
transaction to whichever server session is free, where that name is unknown ("does
not exist") or names another client's statement ("already exists").  PgBouncer
carries them from 1.21 on, with ``max_prepared_statements`` set; before that, and in
other poolers, it cannot.  So behind a pooler shardq prepares nothing unless the
setting ``prepare`` says to (``shardq doctor`` finds out whether it may), and a runner
that meets a lost statement anyway stops preparing (:func:`threshold`).

Which mode a pooler runs in no single connection can tell:
:func:`pools_transactions` proves transaction pooling with two.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg

from shardq.core import sqlfiles
from shardq.core.boundary import connect_kwargs
from shardq.core.deadline import cut_socket

log = logging.getLogger("shardq")

PROBE_ROUNDS = 2
"""Rounds of :func:`pools_transactions`' probe."""


def threshold(prepare: bool | None, pooled: bool) -> int | None:
    """psycopg's ``prepare_threshold`` for the setting ``prepare`` (None: prepare unless
    a pooler is in front): 0 prepares every statement on its first run on a connection,
    None prepares nothing."""
    if prepare is None:
        prepare = not pooled
    return 0 if prepare else None


def server_pid(rows: list[Any]) -> int:
    """The server session's process id, from ``backend_pid``'s rows."""
    return int(rows[0][0])


def behind_pooler(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` reaches its server through a pooler (see the module's docstring)."""
    rows = conn.execute(sqlfiles.plain("backend_pid"), prepare=False).fetchall()
    return server_pid(rows) != conn.info.backend_pid


async def behind_pooler_async(conn: psycopg.AsyncConnection[Any]) -> bool:
    """:func:`behind_pooler` on an asyncio connection."""
    cursor = await conn.execute(sqlfiles.plain("backend_pid"), prepare=False)
    return server_pid(await cursor.fetchall()) != conn.info.backend_pid


def stopped_preparing(cause: BaseException) -> None:
    """Log, once per runner, that a pooler lost a prepared statement and that the runner
    prepares none from now on."""
    log.warning("a prepared statement was lost behind a connection pooler (%s): preparing "
                "none from now on; set prepare off (SHARDQ_PREPARE=0) for this DSN, or run "
                "`shardq doctor`", str(cause).strip().splitlines()[0])


def session_refusal(listen: bool, vacuum: bool) -> str | None:
    """Why a worker or janitor that would ``listen`` (LISTEN for enqueues) or ``vacuum``
    (the vacuum step, under a session advisory lock) cannot run through a transaction
    pooler, in one line; None when it would do neither."""
    needs = [(what, flag) for on, what, flag in (
        (listen, "LISTEN", "listen"), (vacuum, "the vacuum step's session lock", "vacuum"))
        if on]
    if not needs:
        return None
    flags = " ".join(f"--no-{flag}" for _, flag in needs)
    variables = ", ".join(f"SHARDQ_{flag.upper()}=0" for _, flag in needs)
    return (f"{' and '.join(what for what, _ in needs)} cannot work through a transaction "
            f"pooler (one server session each, which it does not keep): run with {flags} "
            f"({variables}), or point this at the server or a session pool")


def _pid(conn: psycopg.Connection[Any]) -> int:
    return server_pid(conn.execute(sqlfiles.plain("backend_pid")).fetchall())


def pools_transactions(dsn: str, connect_timeout_s: float) -> bool:
    """Whether the pooler in front of the server pools transactions (PgBouncer's
    ``pool_mode = transaction`` or ``statement``): proven when one client's statements
    ran on two server sessions, or two clients' on one; a session pooler never does
    either.  False when it could not be proven (within ``connect_timeout_s``: a full
    session pool would keep the second client waiting)."""
    options = {"autocommit": True, "prepare_threshold": None,
               **connect_kwargs(connect_timeout_s)}
    try:
        with psycopg.connect(dsn, **options) as first, \
                psycopg.connect(dsn, **options) as second:
            timer = threading.Timer(connect_timeout_s, cut_socket, [second])
            timer.start()
            try:
                return any(_moved(first, second) for _ in range(PROBE_ROUNDS))
            finally:
                timer.cancel()
    except psycopg.OperationalError:
        return False


def _moved(first: psycopg.Connection[Any], second: psycopg.Connection[Any]) -> bool:
    # Two statements in a row: a pooler that hands out its idle sessions in turn
    # (server_round_robin) moves the client between them.
    seen = {_pid(first), _pid(first)}
    with second.transaction():
        # Most poolers hand out the session released last: the one the first just had.
        held = _pid(second)
        seen.add(_pid(first))  # while the second holds a session of its own
    return len(seen) > 1 or held in seen
