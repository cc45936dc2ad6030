"""A server that refuses writes: a standby, or a primary a switchover is demoting.

A planned switchover first makes the old primary refuse writes (SQLSTATE 25006,
``default_transaction_read_only``), then restarts it as a standby.  Such a refusal
wrote nothing, so the work runs again, on a new connection: with
``target_session_attrs=read-write`` libpq finds the new primary.  Here the database
server turns read-only (``ALTER SYSTEM``, then a reload: its sessions refuse writes
too), then writable again a second later: the enqueue made meanwhile returns, written
once.  The client asks for ``target_session_attrs=read-write``, so libpq turns down
new sessions while the server is read-only.  A server that stays read-only is
reported in one line.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import shardq
from tests.chaos.pg import ThrowawayPostgres
from tests.clients import open_client
from tests.helpers import wait_for


@dataclass
class Database:
    """A fresh database on a server of the module's own, and the kind of client to open."""

    server: ThrowawayPostgres
    url: str
    kind: str

    def client(self, **conninfo: str) -> shardq.Client:
        """A client of the database (its pool open), with libpq settings ``conninfo``."""
        client = open_client(self.kind, make_conninfo(self.url, **conninfo),
                             connect_timeout_s=2, statement_timeout_s=5)
        client.enqueue("q", {"n": 0})
        return client

    def read_only(self, on: bool) -> None:
        """Make the server refuse writes, in the sessions it has too, as a switchover's
        first step does (or accept them again)."""
        with psycopg.connect(self.server.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER SYSTEM SET default_transaction_read_only = {}")
                         .format(sql.Literal(on)))
            conn.execute("SELECT pg_reload_conf()")
        # The postmaster reloads, then signals every backend at once: a new session that
        # sees the setting means the pool's sessions were told too (they apply it before
        # their next statement).
        wanted = ("on" if on else "off",)

        def told() -> bool:
            with psycopg.connect(self.server.url(), autocommit=True) as conn:
                return conn.execute("SHOW default_transaction_read_only").fetchone() == wanted

        wait_for(told, timeout=10, interval=0.05, what="the setting to be reloaded")


@pytest.fixture(scope="module")
def server() -> Iterator[ThrowawayPostgres]:
    """A server of the module's own: it is made read-only, which no other test may see."""
    made = ThrowawayPostgres()
    yield made
    made.close()


@pytest.fixture(params=["Client", "AsyncClient"])
def database(request: pytest.FixtureRequest, server: ThrowawayPostgres) -> Iterator[Database]:
    made = Database(server, server.url(server.create_database()), str(request.param))
    yield made
    made.read_only(False)


def test_a_write_refused_as_read_only_runs_again_on_a_new_connection(
        database: Database) -> None:
    # As a client of a failover pair asks: libpq turns down read-only sessions, so the
    # pool waits for a writable server (here, the same one a second later).
    client = database.client(target_session_attrs="read-write")
    database.read_only(True)
    writable = threading.Timer(1.0, database.read_only, (False,))
    writable.start()
    try:
        client.enqueue("q", {"n": 1})
    finally:
        writable.join()
        client.close()
    with psycopg.connect(database.url) as conn:
        assert conn.execute("SELECT count(*) FROM shardq.tasks").fetchone() == (2,)


def test_a_server_that_stays_read_only_is_named(database: Database) -> None:
    client = database.client()
    database.read_only(True)
    try:
        with pytest.raises(shardq.DatabaseError, match=r"read-only transaction: the server "
                           r"is read-only \(a standby\?\); name the primary"):
            client.enqueue("q", {"n": 1})
    finally:
        client.close()
