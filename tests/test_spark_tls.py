"""Spark's JDBC writer over TLS with ``sslmode=verify-full``, as least-privileged roles:
the DSN's TLS parameters reach pgjdbc (tests/tls.py's server takes TLS connections
only), a CA that did not sign the server's certificate fails the write in one line,
and a staged write needs the grants of ``--grants ROLE --spark``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import shardq
from shardq.spark import write_tasks
from shardq.spark.jdbc import jdbc_target
from tests.helpers import scalar, shardq_cli
from tests.spark_env import require_spark
from tests.tls import TlsServer, missing, tls_server

require_spark()
if missing() is not None:
    pytest.skip(str(missing()), allow_module_level=True)

from pyspark.sql import functions as F  # noqa: E402

PASSWORD = "a-password-" + uuid.uuid4().hex
ROLES = ("shardq_owner", "shardq_producer", "shardq_spark")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    with tls_server(tmp_path_factory.mktemp("tls")) as found:
        yield found


@pytest.fixture(scope="module")
def database(server: TlsServer) -> str:
    """A database its owner role migrated; shardq_producer granted the use workers and
    producers need, shardq_spark that and CREATE for staging tables."""
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        for role in ROLES:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD ").format(
                sql.Identifier(role)) + sql.Literal(PASSWORD))
        conn.execute("CREATE DATABASE app OWNER shardq_owner")
    owner = server.url("app", "shardq_owner", PASSWORD)
    shardq_cli("migrate", "--grants", "shardq_producer", dsn=owner)
    shardq_cli("migrate", "--grants", "shardq_spark", "--spark", dsn=owner)
    return "app"


def frame(spark: Any, n: int) -> Any:
    return spark.range(n).select(F.col("id").alias("n"),
                                 F.concat(F.lit("k"), F.col("id").cast("string")).alias("k"))


def test_the_jdbc_url_carries_verify_full(server: TlsServer, database: str) -> None:
    target = jdbc_target(server.url(database, "shardq_spark", PASSWORD))
    assert "sslmode=verify-full" in target.jdbc_url
    assert f"sslrootcert={server.certificates.ca}".replace("/", "%2F") in target.jdbc_url
    assert target.properties == {"user": "shardq_spark", "password": PASSWORD}


def test_direct_and_staged_writes_over_verify_full(spark: Any, server: TlsServer,
                                                   database: str) -> None:
    spark_role = server.url(database, "shardq_spark", PASSWORD)
    direct = write_tasks(frame(spark, 50), dsn=spark_role, queue="direct", payload=["n"])
    staged = write_tasks(frame(spark, 40), dsn=spark_role, queue="staged", payload=["n"],
                         key="k")
    assert (direct.path, staged.path, staged.tasks) == ("direct", "staged", 40)
    admin = server.url(database)
    assert scalar(admin, "SELECT count(*) FROM shardq.tasks WHERE queue = 'direct'") == 50
    assert scalar(admin, "SELECT count(*) FROM pg_tables WHERE schemaname = 'shardq' "
                         "AND tablename LIKE 'spark_stage_%%'") == 0  # dropped once merged
    # The producers' role writes plain rows straight into shardq.tasks too.
    producer = server.url(database, "shardq_producer", PASSWORD)
    assert write_tasks(frame(spark, 5), dsn=producer, queue="direct", payload=["n"]).path \
        == "direct"
    assert scalar(admin, "SELECT count(*) FROM shardq.tasks WHERE queue = 'direct'") == 55


def test_a_staged_write_without_its_grant_is_one_line(spark: Any, server: TlsServer,
                                                      database: str) -> None:
    producer = server.url(database, "shardq_producer", PASSWORD)
    with pytest.raises(shardq.PermissionDenied) as caught:
        write_tasks(frame(spark, 3), dsn=producer, queue="staged", payload=["n"], key="k")
    assert str(caught.value) == (
        "permission denied for schema shardq (role shardq_producer): a staged write makes "
        "its staging table in the schema shardq: its owner grants that with `shardq migrate "
        "--grants shardq_producer --spark`")


def test_a_ca_that_did_not_sign_the_certificate_fails_the_write_in_one_line(
        spark: Any, server: TlsServer, database: str) -> None:
    """The driver's connection trusts the right CA, the executors' JDBC URL the wrong
    one: the JDBC connections verify the server's certificate too."""
    good = server.url(database, "shardq_spark", PASSWORD)
    wrong = server.url(database, "shardq_spark", PASSWORD, sslrootcert=server.wrong_ca)
    with pytest.raises(shardq.SparkWriteError) as caught:
        write_tasks(frame(spark, 3), url=wrong, dsn=good, queue="wrong", payload=["n"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "the Spark write failed: the server's certificate was refused over JDBC (is "
        "sslrootcert the CA that signed it, for the host in the URL?): SSL error: "), message
    assert PASSWORD not in message
    assert scalar(server.url(database), "SELECT count(*) FROM shardq.tasks "
                                        "WHERE queue = 'wrong'") == 0
