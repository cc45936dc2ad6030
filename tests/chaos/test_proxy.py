"""The fault proxy against a real PostgreSQL: each fault does what it says, and no more."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy

pytestmark = pytest.mark.timeout(60)

Conn = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture
def table(chaos_pg: ThrowawayPostgres) -> Iterator[sql.Identifier]:
    name = sql.Identifier(f"proxy_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(chaos_pg.url(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (n int)").format(name))
    yield name
    with psycopg.connect(chaos_pg.url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(name))


def direct_count(pg: ThrowawayPostgres, table: sql.Identifier) -> int:
    with psycopg.connect(pg.url(), autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
        return int(row[0]) if row else -1


def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run ``work`` in a daemon thread; the list gets its result or exception."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(work())
        except Exception as exc:
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def in_transaction(conn: Conn, *statements: tuple[sql.Composed, tuple[object, ...]]) -> None:
    """Run ``statements`` (each with its parameters) in one transaction on ``conn``."""
    with conn.transaction():
        for statement, params in statements:
            conn.execute(statement, params)


def test_passes_queries_prepared_statements_and_copy(proxy: Proxy, table: sql.Identifier,
                                                     chaos_pg: ThrowawayPostgres) -> None:
    with psycopg.connect(proxy.url("postgres"), autocommit=True) as conn:
        for n in range(8):  # past psycopg's prepare threshold: Bind of a named statement
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(table), (n,))
        with conn.cursor().copy(sql.SQL("COPY {} (n) FROM STDIN").format(table)) as copy:
            for n in range(100):
                copy.write_row((n,))
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert direct_count(chaos_pg, table) == 108
    assert proxy.withheld == []


def test_cut_all_closes_open_connections_and_new_ones_work(proxy: Proxy) -> None:
    conn = psycopg.connect(proxy.url("postgres"), autocommit=True)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    proxy.cut_all()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()
    with psycopg.connect(proxy.url("postgres"), autocommit=True) as again:
        assert again.execute("SELECT 2").fetchone() == (2,)


def test_withheld_commit_is_committed_but_the_client_never_hears(
        proxy: Proxy, table: sql.Identifier, chaos_pg: ThrowawayPostgres) -> None:
    proxy.withhold_reply(rb"^\s*COMMIT", times=1)
    conn = psycopg.connect(proxy.url("postgres"), autocommit=True)
    with pytest.raises(psycopg.OperationalError), conn.transaction():
        conn.execute(sql.SQL("INSERT INTO {} VALUES (1)").format(table))
    assert conn.closed
    assert direct_count(chaos_pg, table) == 1  # the server did commit it
    assert proxy.withheld == [b"COMMIT"]
    assert proxy.pending_withholds == 0
    with psycopg.connect(proxy.url("postgres"), autocommit=True) as again, again.transaction():
        again.execute(sql.SQL("INSERT INTO {} VALUES (2)").format(table))
    assert direct_count(chaos_pg, table) == 2


def test_withheld_commit_is_of_a_transaction_in_which_the_statement_returned_a_row(
        proxy: Proxy, table: sql.Identifier, chaos_pg: ThrowawayPostgres) -> None:
    insert = sql.SQL("INSERT INTO {} VALUES (%s)").format(table)
    watched = sql.SQL("UPDATE {} SET n = n WHERE n = %s RETURNING n").format(table)
    proxy.withhold_commit(rb"^UPDATE .* RETURNING n", times=1)
    conn = psycopg.connect(proxy.url("postgres"), autocommit=True)
    for n in range(4):  # no row: no fault (and past psycopg's prepare threshold: Bind)
        with conn.transaction():
            conn.execute(insert, (n,))
            conn.execute(watched, (-1,))
    conn.execute(watched, (0,))  # a row, in autocommit: no COMMIT follows
    with conn.transaction():  # so this one is not withheld
        conn.execute(insert, (4,))
    assert proxy.withheld == []
    with pytest.raises(psycopg.OperationalError):  # a row: this transaction's COMMIT is withheld
        in_transaction(conn, (watched, (1,)), (insert, (5,)))
    assert conn.closed
    assert direct_count(chaos_pg, table) == 6  # the server did commit it
    assert proxy.withheld == [b"COMMIT after UPDATE " + table.as_string().encode()
                              + b" SET n = n WHERE n = $1 RETURNING n"]
    assert proxy.pending_commits == 0
    with psycopg.connect(proxy.url("postgres"), autocommit=True) as again, again.transaction():
        again.execute(watched, (1,))  # nothing is armed any more
        again.execute(insert, (6,))
    assert direct_count(chaos_pg, table) == 7


def test_withholds_a_prepared_statement_run_by_bind(proxy: Proxy, table: sql.Identifier,
                                                   chaos_pg: ThrowawayPostgres) -> None:
    statement = sql.SQL("UPDATE {} SET n = n + 1").format(table)
    with psycopg.connect(chaos_pg.url(), autocommit=True) as direct:
        direct.execute(sql.SQL("INSERT INTO {} VALUES (0)").format(table))
    conn = psycopg.connect(proxy.url("postgres"), autocommit=True)
    for _ in range(3):
        conn.execute(statement, prepare=True)
    proxy.withhold_reply(rb'UPDATE "proxy_\w+" SET n = n \+ 1', times=1)
    with pytest.raises(psycopg.OperationalError):
        conn.execute(statement, prepare=True)
    with psycopg.connect(chaos_pg.url(), autocommit=True) as direct:
        row = direct.execute(sql.SQL("SELECT n FROM {}").format(table)).fetchone()
    assert row == (4,)  # three answered, the fourth ran unanswered


def test_withheld_copy_in_a_transaction_is_rolled_back(proxy: Proxy, table: sql.Identifier,
                                                       chaos_pg: ThrowawayPostgres) -> None:
    proxy.withhold_reply(rb"^COPY ", times=1)
    conn = psycopg.connect(proxy.url("postgres"), autocommit=True)
    with pytest.raises(psycopg.OperationalError), conn.transaction(), \
            conn.cursor().copy(sql.SQL("COPY {} (n) FROM STDIN").format(table)) as copy:
        copy.write_row((1,))
    assert direct_count(chaos_pg, table) == 0  # the connection died before COMMIT


def test_half_open_freezes_open_connections_for_good(proxy: Proxy) -> None:
    frozen = psycopg.connect(proxy.url("postgres"), autocommit=True)
    proxy.half_open(True)
    thread, result = in_thread(lambda: frozen.execute("SELECT 1").fetchone())
    thread.join(1.5)
    assert thread.is_alive()
    assert result == []
    with pytest.raises(psycopg.OperationalError):  # new connections freeze too while on
        psycopg.connect(proxy.url("postgres"), connect_timeout=2)
    proxy.half_open(False)
    with psycopg.connect(proxy.url("postgres"), autocommit=True) as fresh:
        assert fresh.execute("SELECT 3").fetchone() == (3,)
    thread.join(1.0)
    assert thread.is_alive()  # still frozen after the fault is off
    proxy.cut_all()
    thread.join(5)
    assert isinstance(result[0], psycopg.OperationalError)


def test_blackhole_holds_traffic_until_it_heals(proxy: Proxy) -> None:
    conn = psycopg.connect(proxy.url("postgres"), autocommit=True)
    proxy.blackhole(True)
    thread, result = in_thread(lambda: conn.execute("SELECT 5").fetchone())
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(proxy.url("postgres"), connect_timeout=2)
    assert thread.is_alive()
    assert result == []
    proxy.blackhole(False)
    thread.join(5)
    assert result == [(5,)]  # the partition healed: the query went through
    with psycopg.connect(proxy.url("postgres"), autocommit=True) as fresh:
        assert fresh.execute("SELECT 6").fetchone() == (6,)
