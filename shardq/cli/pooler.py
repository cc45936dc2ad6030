"""``shardq doctor``'s look at a connection pooler in front of the server (PgBouncer).

The client found out when it connected whether a pooler is in front and whether it
pools transactions (:mod:`shardq.core.pooler`).  Here doctor also finds out whether it
carries prepared statements from one server session to another (PgBouncer 1.21+ with
``max_prepared_statements``), and, where this role may read PgBouncer's admin console
(``admin_users`` or ``stats_users``), its version and the size of this database's pool.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from shardq.cli.finding import Finding
from shardq.client import Client
from shardq.core import sqlfiles
from shardq.core.boundary import connect_kwargs

PROBE_ROUNDS = 3
Conn = psycopg.Connection[tuple[Any, ...]]


@dataclass(frozen=True)
class Pooler:
    """A pooler in front of the server, as doctor found it."""

    mode: str
    """``transaction`` (it pools transactions: also PgBouncer's ``statement``) or
    ``session``."""
    carries_prepared: bool | None
    """Whether a prepared statement still ran on another server session (None: no
    statement was seen to move)."""
    version: str | None = None
    """PgBouncer's version, from its admin console (None: not readable by this role)."""
    pool_size: int | None = None
    """Server connections of this database's pool for this user (None: not readable)."""

    @property
    def named(self) -> str:
        """The pooler in words: its version when known."""
        return self.version or "a connection pooler"


def connect(dsn: str, connect_timeout_s: float, **options: Any) -> Conn:
    """A connection for doctor's probes: autocommit, and nothing prepared (a pooler in
    front may not carry it) unless ``options`` say so."""
    return psycopg.connect(dsn, **{"autocommit": True, "prepare_threshold": None,
                                   **connect_kwargs(connect_timeout_s), **options})


def look(dsn: str, transactions: bool, connect_timeout_s: float) -> Pooler:
    """The pooler in front of ``dsn``'s server (``transactions``: it pools them, as the
    client found when it connected)."""
    carried = _carries_prepared(dsn, connect_timeout_s) if transactions else True
    version, size = _admin(dsn, connect_timeout_s)
    return Pooler("transaction" if transactions else "session", carried, version, size)


def _carries_prepared(dsn: str, connect_timeout_s: float) -> bool | None:
    """Prepare a statement on one connection, hold the server session it ran on from a
    second, and run the statement again: through a transaction pooler it then runs on
    another session, where the pooler must prepare it anew."""
    query, token = sqlfiles.plain("doctor_prepared"), {"token": uuid.uuid4().hex}
    # (psycopg prepares nothing with a prepare_threshold of None, prepare=True or not.)
    with connect(dsn, connect_timeout_s, prepare_threshold=0) as first, \
            connect(dsn, connect_timeout_s) as second:
        try:
            for _ in range(PROBE_ROUNDS):
                [(ran_on, _)] = first.execute(query, token, prepare=True).fetchall()
                with second.transaction():
                    second.execute(query, token)
                    [(again, echoed)] = first.execute(query, token, prepare=True).fetchall()
                if echoed != token["token"]:  # another client's statement of that name ran
                    return False
                if again != ran_on:
                    return True
        except psycopg.Error:
            # Its name not found on this server session, or taken by another client's
            # statement (of other parameters, or prepared there before ours).
            return False
    return None


def _admin(dsn: str, connect_timeout_s: float) -> tuple[str | None, int | None]:
    """PgBouncer's version and this database's pool size, from its admin console (the
    database ``pgbouncer`` at the same address); Nones when this role may not read it."""
    try:
        with connect(make_conninfo(dsn, dbname="pgbouncer"), connect_timeout_s) as admin:
            version = str(admin.execute(sqlfiles.console("pgbouncer_version")).fetchall()[0][0])
            databases = admin.execute(sqlfiles.console("pgbouncer_databases"))
            names = [c.name for c in databases.description or []]
            pools = {row[0]: dict(zip(names, row, strict=True)) for row in databases}
    except psycopg.Error:
        return None, None
    with connect(dsn, connect_timeout_s) as conn:
        database = conn.info.dbname
    pool = pools.get(database, {}).get("pool_size")
    return version, None if pool is None else int(pool)


def pooled_connections(pooler: Pooler, daemon: int, processes: int, free: int) -> Finding:
    """Through a pooler, a daemon's connections take the server connections of the pool
    of its database and user: in session mode each for as long as it is open, in
    transaction mode for a transaction at a time."""
    pool = ("this database's pool" if pooler.pool_size is None
            else f"this database's pool of {pooler.pool_size}")
    seen = (f"one `shardq consume --processes {processes}` opens up to {daemon} connections "
            f"to {pooler.named} ({pooler.mode} mode); {pool} draws on the server's {free} "
            "free connections")
    if pooler.mode == "transaction":
        return Finding("pool size", True, seen + "; each connection holds a server "
                       "connection for a transaction at a time, so the pool is shared "
                       "between transactions")
    need = (f"in session mode each holds one of the pool's server connections while it is "
            f"open, so the pool (default_pool_size, or the database's pool_size) must hold "
            f"{daemon} per daemon and the clients' connections besides: the others wait "
            "for one (query_wait_timeout)")
    if pooler.pool_size is None:
        return Finding("pool size", True, f"{seen}; {need} (the pool's size is not readable "
                       "by this role: PgBouncer's admin_users or stats_users may read it)")
    if daemon > pooler.pool_size:
        return Finding("pool size", False, f"{seen}; {need}",
                       f"raise default_pool_size (or this database's pool_size) to at least "
                       f"{daemon} per daemon plus the clients' connections, or use "
                       "transaction mode (then --no-listen --no-vacuum)")
    return Finding("pool size", True, f"{seen}; {pooler.pool_size // daemon} such daemons "
                   "fit in the pool, each connection holding a server connection while open")


def pooler_check(client: Client, pooler: Pooler | None) -> Finding:
    """A pooler in front, and whether shardq's prepared statements work through it."""
    if pooler is None:
        return Finding("pooler", True, "none: connections reach the server directly")
    seen = f"{pooler.named} in {pooler.mode} mode"
    prepare = client.config.prepare
    if pooler.carries_prepared is False:
        seen += ("; it does not carry a prepared statement to another server session "
                 "(PgBouncer before 1.21, or max_prepared_statements = 0)")
        if prepare:
            return Finding("pooler", False, seen,
                           "set prepare off (SHARDQ_PREPARE=0, or unset it): a statement "
                           "prepared on one server session fails on the next")
        return Finding("pooler", True, seen + ": shardq prepares none through it")
    if pooler.carries_prepared is None:
        return Finding("pooler", True, seen + "; no statement was seen to move between "
                       "server sessions, so whether it carries prepared statements is not "
                       "known: shardq prepares none through it unless prepare is on")
    if prepare:
        return Finding("pooler", True, seen + "; prepared statements work through it, and "
                       "shardq prepares them (prepare on)")
    return Finding("pooler", True, seen + "; prepared statements work through it: prepare on "
                   "(SHARDQ_PREPARE=1) has each statement parsed and planned once per "
                   "connection (a drain ran 1.2x as fast)")
