"""shardq through PgBouncer: Debian's 1.18, which cannot carry prepared statements, in
transaction mode and in session mode, each started by the tests (tests/pooler.py) in
front of a server on TCP.

The whole API runs through both modes in the ``behaviour`` tests
(``SHARDQ_TEST_POOLER=transaction|session pytest -m behaviour``); here is what only a
pooler brings: finding it and its mode, preparing nothing through it, a lost prepared
statement, the worker's and janitor's refusals, doctor's findings, and a worker that
drains a queue and stops promptly through it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
import pytest

import shardq
from shardq.cli import doctor
from shardq.cli.finding import Finding
from shardq.worker.config import WorkerConfig
from tests import pooler
from tests.apps import quick
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.helpers import free_port, one_line_error, query, shardq_cli, wait_for
from tests.pooler import PgBouncer, pgbouncer
from tests.tcp_postgres import tcp_server

pytestmark = pytest.mark.skipif(not pooler.available(),
                                reason="no PgBouncer: apt-get install pgbouncer")


@pytest.fixture(scope="module")
def server() -> Iterator[Databases]:
    """Fresh databases on a server on TCP (SHARDQ_TEST_DSN's, or the embedded one)."""
    with tcp_server() as url:
        databases = Databases(url)
        yield databases
        databases.drop_all()


@pytest.fixture(scope="module")
def transaction(server: Databases) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction mode."""
    with pgbouncer(server.server_url, "transaction") as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def session(server: Databases) -> Iterator[PgBouncer]:
    """A PgBouncer in session mode, with a pool of 25 server connections."""
    with pgbouncer(server.server_url, "session", default_pool_size=25) as bouncer:
        yield bouncer


def findings(url: str, worker: WorkerConfig | None = None, **settings: Any
             ) -> dict[str, Finding]:
    with shardq.Client(url, **settings) as client:
        return {f.check: f for f in doctor.examine(client, worker or WorkerConfig())}


def held_prepared(url: str, sessions: int) -> ExitStack:
    """``sessions`` connections through a pooler, each with psycopg's first prepared
    statement (``_pg3_0``) made on a server session it holds in a transaction: every
    one of those sessions keeps that name once they are given back."""
    stack = ExitStack()
    for _ in range(sessions):
        conn = stack.enter_context(psycopg.connect(url, autocommit=True, prepare_threshold=0))
        stack.enter_context(conn.transaction())
        conn.execute("SELECT 1", prepare=True)
    return stack


# -- finding the pooler ---------------------------------------------------------------------


def test_a_client_finds_the_pooler_and_its_mode_and_prepares_nothing_through_it(
        server: Databases, transaction: PgBouncer, session: PgBouncer) -> None:
    direct = server.create()
    cases = [(direct, False, False, 0), (transaction.url(direct), True, True, None),
             (session.url(direct), True, False, None)]
    for url, pooled, transactions, threshold in cases:
        with shardq.Client(url) as client:
            assert (client.db.pooled, client.db.transaction_pooled) == (pooled, transactions)
            assert client.db.prepare_threshold == threshold
        with shardq.Client(url, prepare=True) as client:
            assert client.db.prepare_threshold == 0

        async def opened(url: str = url) -> tuple[bool, bool, int | None]:
            async with shardq.AsyncClient(url) as aclient:
                assert aclient.db is not None
                db = aclient.db
                return db.pooled, db.transaction_pooled, db.prepare_threshold

        assert asyncio.run(opened()) == (pooled, transactions, threshold)


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
def test_a_prepared_statement_lost_behind_the_pooler_turns_preparing_off_and_runs_again(
        server: Databases, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """prepare on (as a user may force it) through PgBouncer 1.18 in transaction mode:
    the client's first prepared statement meets a server session that has a statement
    of that name already, and is refused; the enqueue runs again unprepared, once."""
    direct = server.create()
    with pgbouncer(server.server_url, "transaction", default_pool_size=2) as bouncer:
        url = bouncer.url(direct)
        with held_prepared(url, 2):
            pass  # both server sessions of the pool now hold another client's _pg3_0
        with caplog.at_level(logging.WARNING, "shardq"):
            if kind == "Client":
                with shardq.Client(url, prepare=True) as client:
                    task_id = client.enqueue("lost", {"n": 1})
                    assert client.db.prepare_threshold is None
                    assert client.get(task_id) is not None
            else:
                async def enqueue() -> Any:
                    async with shardq.AsyncClient(url, prepare=True) as aclient:
                        found = await aclient.enqueue("lost", {"n": 1})
                        assert aclient.db is not None
                        assert aclient.db.prepare_threshold is None
                        return found

                task_id = asyncio.run(enqueue())
    lost = [r.getMessage() for r in caplog.records if "prepared statement was lost" in
            r.getMessage()]
    assert len(lost) == 1, lost
    assert "SHARDQ_PREPARE=0" in lost[0]
    assert query(direct, "SELECT id FROM shardq.tasks") == [(task_id,)]


# -- workers and the janitor ------------------------------------------------------------------


def test_a_worker_refuses_listen_and_the_vacuum_step_through_a_transaction_pooler(
        server: Databases, transaction: PgBouncer) -> None:
    url = transaction.url(server.create())
    env = {"SHARDQ_LISTEN": "", "SHARDQ_VACUUM": ""}
    cleared = {k: v for k, v in os.environ.items() if k not in env}
    refused = Daemon({**cleared, "SHARDQ_DSN": url}, "tests.apps.quick:app")
    code, out = refused.wait()
    assert code == 2
    [line] = out.splitlines()
    assert line.startswith("shardq: LISTEN and the vacuum step's session lock cannot work "
                           "through a transaction pooler"), line
    assert "--no-listen --no-vacuum (SHARDQ_LISTEN=0, SHARDQ_VACUUM=0)" in line
    janitor = shardq_cli("janitor", dsn=url, check=False, env={"SHARDQ_VACUUM": "1"})
    one_line_error(janitor, "vacuum step", "--no-vacuum")


@pytest.mark.parametrize("prepare", ["", "1"], ids=["prepare unset", "prepare forced on"])
def test_a_worker_drains_through_a_transaction_pooler_and_stops_at_once(
        server: Databases, prepare: str) -> None:
    """With the flags docs/how-to/pgbouncer.md gives: every task runs, and SIGTERM ends
    the worker with nothing left locked (prepare forced on: its first lost statement
    turns preparing off)."""
    direct = server.create()
    with pgbouncer(server.server_url, "transaction") as bouncer:
        url = bouncer.url(direct)
        with held_prepared(url, 4), shardq.Client(direct) as client:
            quick.app.use_client(client)
            quick.nothing.enqueue_many([(n,) for n in range(3000)])
        env = {**os.environ, "SHARDQ_DSN": url, "SHARDQ_NOTIFY": "0",
               "PYTHONPATH": os.pathsep.join(sys.path), **({"SHARDQ_PREPARE": prepare}
                                                          if prepare else {})}
        worker = Daemon(env, "tests.apps.quick:app", "--no-listen", "--no-vacuum")
        try:
            wait_for(lambda: query(direct, "SELECT count(*) FROM shardq.tasks") == [(0,)],
                     timeout=60)
            worker.signal()
            code, out = worker.wait(timeout=15)
        finally:
            worker.kill()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert query(direct, "SELECT count(*) FROM shardq.tasks WHERE status = 'locked'") == [(0,)]


def test_results_through_a_transaction_pooler_are_polled_and_say_so_once(
        server: Databases, transaction: PgBouncer, caplog: pytest.LogCaptureFixture) -> None:
    url = transaction.url(server.create())
    with shardq.Client(url) as client, caplog.at_level(logging.WARNING, "shardq"):
        quick.app.use_client(client)
        ids = [quick.echo.enqueue(n) for n in range(2)]
        env = {**os.environ, "SHARDQ_DSN": url, "PYTHONPATH": os.pathsep.join(sys.path)}
        worker = Daemon(env, "tests.apps.quick:app", "--no-listen", "--no-vacuum")
        try:
            assert [client.result(i, wait_s=30).value for i in ids] == [0, 1]
        finally:
            worker.signal()
            assert worker.wait()[0] == 0
    told = [r.getMessage() for r in caplog.records if "LISTEN cannot work" in r.getMessage()]
    assert told == ["LISTEN cannot work through a transaction pooler: calls that wait for "
                    "results poll instead; set notify off (SHARDQ_NOTIFY=0) to send no "
                    "NOTIFY either"]


# -- doctor ------------------------------------------------------------------------------------


def test_doctor_through_a_transaction_pooler(server: Databases,
                                             transaction: PgBouncer) -> None:
    url = transaction.url(server.create())
    seen = findings(url)
    assert seen["pooler"].ok, seen["pooler"]
    assert seen["pooler"].seen.startswith("PgBouncer 1.")
    assert "transaction mode" in seen["pooler"].seen
    assert "does not carry a prepared statement" in seen["pooler"].seen
    listen = seen["LISTEN/NOTIFY"]
    assert not listen.ok
    assert "--no-listen --no-vacuum" in listen.advice
    assert "pool of 20" in seen["pool size"].seen
    # A check never blames permissions it was not refused.
    assert not any("pg_monitor" in f.advice for f in seen.values()), seen
    polling = findings(url, WorkerConfig(listen=False), prepare=True)
    assert polling["LISTEN/NOTIFY"].ok
    assert not polling["pooler"].ok
    assert "SHARDQ_PREPARE=0" in polling["pooler"].advice


def test_doctor_counts_a_session_pool_for_the_daemons(server: Databases,
                                                     session: PgBouncer) -> None:
    url = session.url(server.create())
    one = findings(url)
    assert one["pooler"].ok
    assert "session mode" in one["pooler"].seen
    assert "SHARDQ_PREPARE=1" in one["pooler"].seen
    assert one["LISTEN/NOTIFY"].ok
    assert one["pool size"].ok, one["pool size"]
    assert "2 such daemons fit" in one["pool size"].seen  # 12 connections each, in 25
    three = findings(url, WorkerConfig(processes=3))["pool size"]
    assert not three.ok
    assert "must hold 36 per daemon" in three.seen
    assert three.advice.startswith("raise default_pool_size")


def test_doctor_blames_permissions_only_when_the_server_refused_one(
        server: Databases) -> None:
    url = server.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET ROLE pg_monitor")
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
            conn.execute("SELECT * FROM pg_authid")
        conn.execute("RESET ROLE")
        conn.execute("PREPARE twice AS SELECT 1")
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement) as clash:
            conn.execute("PREPARE twice AS SELECT 1")
    assert "pg_monitor" in doctor.failed("limits", refused.value).advice
    lost = doctor.failed("limits", clash.value)
    assert "pg_monitor" not in lost.advice
    assert "SHARDQ_PREPARE=0" in lost.advice


# -- the page ----------------------------------------------------------------------------------


def test_the_pgbouncer_page_runs_as_written(server: Databases, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/how-to/pgbouncer.md, every command of it (those marked ``pgbouncer``, which
    tests/test_docs.py leaves out), with its addresses pointed at this test's server, a
    fresh database and a free port for its PgBouncer."""
    from tests.test_docs import PAGES, run_page

    direct = server.create(migrated=False)
    port = free_port()
    parts = urlsplit(server.server_url)
    user, password = unquote(parts.username or pooler.USER), unquote(parts.password or "")
    swaps = {
        "postgresql://app@127.0.0.1:5432/app": direct,
        "postgresql://app@127.0.0.1:6432/app": pooler.through(direct, port),
        "host=127.0.0.1 port=5432": f"host={parts.hostname} port={parts.port or 5432}",
        "listen_port = 6432": f"listen_port = {port}",
        "admin_users = app": f"admin_users = {user}",
        '"app" ""': f'"{user}" "{password}"',
    }
    page = PAGES["how-to/pgbouncer.md"]
    text = "".join(block.text for block in page)
    assert [old for old in swaps if old not in text] == []
    if os.geteuid() == 0:  # as the page says: root starts PgBouncer with -u
        swaps["pgbouncer pgbouncer.ini"] = f"pgbouncer -u {pooler.USER} pgbouncer.ini"

    def swapped(text: str) -> str:
        for old, new in swaps.items():
            text = text.replace(old, new)
        return text

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    counts = run_page([dataclasses.replace(b, text=swapped(b.text)) for b in page], tmp_path,
                      pooler=True)
    assert counts["shell"] == len([b for b in page if b.verb == "run"])
    for name in ("tasks", "ask"):
        sys.modules.pop(name, None)
