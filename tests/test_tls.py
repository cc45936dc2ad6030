"""TLS as managed databases give it: a server that takes TLS connections only, with a
certificate of a CA the test made, and shardq connecting with ``sslmode=verify-full``
from both clients, ``shardq migrate`` and a ``shardq consume`` daemon (its LISTEN
connection too), as a least-privileged role with a password.  A CA that did not sign
the server's certificate, or a name the certificate does not hold, is one line.

(Spark's JDBC writer over the same server: tests/test_spark_tls.py.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import shardq
from tests.daemons import app_daemon
from tests.helpers import claim_all, one_line_error, scalar, shardq_cli
from tests.tls import TlsServer, missing, tls_server

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

APP = '''\
import shardq

app = shardq.App()


@app.task(queue="tls", keep_result_s=60)
def double(n: int) -> int:
    return 2 * n
'''
PASSWORD = "a-password-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    with tls_server(tmp_path_factory.mktemp("tls")) as found:
        yield found


@pytest.fixture(scope="module")
def database(server: TlsServer) -> str:
    """A database an owner role migrated over verify-full, its worker role granted."""
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        for role in ("shardq_owner", "shardq_worker"):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD ").format(
                sql.Identifier(role)) + sql.Literal(PASSWORD))
        conn.execute("CREATE DATABASE app OWNER shardq_owner")
    owner = server.url("app", "shardq_owner", PASSWORD)
    assert shardq_cli("migrate", "--grants", "shardq_worker", dsn=owner).stdout.splitlines()[
        1].startswith("granted shardq_worker read-write use of the schema shardq")
    return "app"


def ssl_of(server: TlsServer, role: str) -> list[tuple[Any, ...]]:
    """Whether each session of ``role`` uses TLS, and its version."""
    return psycopg.connect(server.url("postgres")).execute(
        "SELECT s.ssl, s.version FROM pg_stat_ssl AS s JOIN pg_stat_activity AS a USING "
        "(pid) WHERE a.usename = %s", (role,)).fetchall()


def test_the_server_refuses_connections_without_tls(server: TlsServer,
                                                   database: str) -> None:
    plain = server.url(database, "shardq_worker", PASSWORD).replace(
        "sslmode=verify-full", "sslmode=disable")
    with pytest.raises(shardq.Unavailable, match="no encryption"):
        shardq.Client(plain, connect_timeout_s=2)


def test_both_clients_work_over_verify_full(server: TlsServer, database: str) -> None:
    url = server.url(database, "shardq_worker", PASSWORD)
    with shardq.Client(url) as client:
        client.enqueue("plain", {"n": 1})
        [task] = claim_all(client, "plain")
        client.ack(task)
        sessions = ssl_of(server, "shardq_worker")
        assert sessions
        assert all(ssl and str(version).startswith("TLSv1.") for ssl, version in sessions)

    async def round_trip() -> int:
        async with shardq.AsyncClient(url) as aclient:
            await aclient.enqueue("plain", {"n": 2})
            return len(await aclient.claim("plain"))

    assert asyncio.run(round_trip()) == 1


def test_a_daemon_works_over_verify_full(server: TlsServer, database: str,
                                         tmp_path: Path) -> None:
    url = server.url(database, "shardq_worker", PASSWORD)
    with (app_daemon(tmp_path, "tls_app", APP, url) as (tls_app, daemon),
          shardq.Client(url) as client):
        tls_app.app.use_client(client)
        task = tls_app.double.enqueue(21)
        assert client.result(task, wait_s=30).value == 42, daemon.output
        # The daemon's listener: its session's last statement (after a comment line).
        assert scalar(server.url("postgres"), "SELECT count(*) FROM pg_stat_activity "
                      "WHERE usename = 'shardq_worker' AND query ~ 'LISTEN \"shardq\"$'"
                      ) == 1
        assert all(ssl for ssl, _ in ssl_of(server, "shardq_worker"))
    assert daemon.proc.returncode == 0, daemon.output


def test_a_ca_that_did_not_sign_the_certificate_is_one_line(server: TlsServer,
                                                            database: str) -> None:
    url = server.url(database, "shardq_worker", PASSWORD, sslrootcert=server.wrong_ca)
    with pytest.raises(shardq.Unavailable) as caught:
        shardq.Client(url, connect_timeout_s=2)
    message = str(caught.value)
    assert "\n" not in message
    assert "SSL error: certificate verify failed (the server's certificate is not signed " \
           f"by a CA in sslrootcert={server.wrong_ca}: is that the CA of this server?)" \
        in message, message
    assert PASSWORD not in message
    for command in (["stats"], ["migrate"], ["consume", "tests.apps.recorder:app"]):
        one_line_error(shardq_cli(*command, dsn=url, check=False),
                       "certificate verify failed", f"sslrootcert={server.wrong_ca}")


def test_a_name_the_certificate_does_not_hold_is_one_line(server: TlsServer,
                                                          database: str) -> None:
    """verify-full checks the name as well as the CA: the right CA, the wrong name."""
    url = server.url(database, "shardq_worker", PASSWORD).replace(
        "@127.0.0.1:", "@db.example.com:") + "&hostaddr=127.0.0.1"
    one_line_error(shardq_cli("stats", dsn=url, check=False),
                   'server certificate for "localhost" (and 1 other name) does not match '
                   'host name "db.example.com"')
