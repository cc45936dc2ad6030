"""shardq.spark without Spark or a database: URLs, writer options (PostgreSQL and
CockroachDB), the merge statements, the deterministic ids and the ledger migration."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest

import shardq
from shardq.core import migrate, sqlfiles
from shardq.core.errors import ConfigError, InvalidTask
from shardq.spark import (
    COCKROACHDB_BATCH_SIZE,
    POSTGRESQL_BATCH_SIZE,
    SPARK_NAMESPACE,
    jdbc_target,
    libpq_url,
    task_id,
    write_stream_tasks,
    write_tasks,
    writer_options,
)
from shardq.spark.merge import merge_query, new_stage_name


def test_shardq_spark_imports_without_pyspark_and_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import shardq, shardq.spark as s\n"
        "try:\n"
        "    s.write_tasks(object(), dsn='postgresql://h/db', queue='q', payload='p')\n"
        "except shardq.ConfigError as exc:\n"
        "    print('refused:', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "refused: shardq.spark needs PySpark: pip install 'shardq[spark]'" in out


@pytest.mark.parametrize(("url", "jdbc", "properties", "dialect"), [
    ("postgresql://postgres@127.0.0.1:5432/test",
     "jdbc:postgresql://127.0.0.1:5432/test", {"user": "postgres"}, "postgresql"),
    ("postgres://ada:p%40ss%3Aw0rd@db.example:6543/app%20db?sslmode=require&application_name=etl",
     "jdbc:postgresql://db.example:6543/app%20db?sslmode=require&ApplicationName=etl",
     {"user": "ada", "password": "p@ss:w0rd"}, "postgresql"),
    ("cockroachdb://root@127.0.0.1:26257/shardq?sslmode=disable",
     "jdbc:postgresql://127.0.0.1:26257/shardq?sslmode=disable", {"user": "root"},
     "cockroachdb"),
    ("postgresql://u@[::1]:5433/db", "jdbc:postgresql://[::1]:5433/db", {"user": "u"},
     "postgresql"),
    ("postgresql://h1:5432,h2:5433/db?target_session_attrs=read-write&user=me",
     "jdbc:postgresql://h1:5432,h2:5433/db?targetServerType=primary", {"user": "me"},
     "postgresql"),
    ("host=h1,h2 port=5432,5433 dbname=db user=me password=a/b target_session_attrs=standby",
     "jdbc:postgresql://h1:5432,h2:5433/db?targetServerType=secondary",
     {"user": "me", "password": "a/b"}, "postgresql"),
    ("host=h1,h2 port=6432 dbname=db", "jdbc:postgresql://h1:6432,h2:6432/db", {},
     "postgresql"),
    ("postgresql://me@dbhost", "jdbc:postgresql://dbhost/me", {"user": "me"}, "postgresql"),
    # TLS: verify-full carries its CA file; libpq's require with a CA file checks the
    # certificate (pgjdbc's verify-ca); sslrootcert=system is the JVM's trust store.
    ("postgresql://me@db:5432/app?sslmode=verify-full&sslrootcert=/etc/ca.pem",
     "jdbc:postgresql://db:5432/app?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
     {"user": "me"}, "postgresql"),
    ("postgresql://me@db:5432/app?sslmode=require&sslrootcert=/etc/ca.pem",
     "jdbc:postgresql://db:5432/app?sslmode=verify-ca&sslrootcert=%2Fetc%2Fca.pem",
     {"user": "me"}, "postgresql"),
    ("postgresql://me@db:5432/app?sslmode=verify-full&sslrootcert=system",
     "jdbc:postgresql://db:5432/app?sslmode=verify-full&sslfactory=org.postgresql.ssl."
     "DefaultJavaSSLFactory", {"user": "me"}, "postgresql"),
])
def test_libpq_urls_become_jdbc_urls(url: str, jdbc: str, properties: dict[str, str],
                                     dialect: str) -> None:
    target = jdbc_target(url)
    assert (target.jdbc_url, target.properties, target.dialect) == (jdbc, properties, dialect)


def test_a_failover_pair_maps_back_to_libpq() -> None:
    target = jdbc_target("postgresql://me@h1:5432,h2:5433/db?target_session_attrs=read-write")
    assert libpq_url(target.jdbc_url, target.properties) == (
        "postgresql://me@h1:5432,h2:5433/db?target_session_attrs=read-write")


def test_jdbc_urls_are_taken_as_they_are_and_map_back_to_libpq() -> None:
    jdbc = "jdbc:postgresql://db:5432/app?sslmode=verify-full&user=ada&password=a%2Fb"
    assert jdbc_target(jdbc).jdbc_url == jdbc
    assert libpq_url(jdbc) == "postgresql://ada:a%2Fb@db:5432/app?sslmode=verify-full"
    target = jdbc_target("postgresql://ada:s3cret@db:5432/app?application_name=x")
    assert libpq_url(target.jdbc_url, target.properties) == (
        "postgresql://ada:s3cret@db:5432/app?application_name=x")
    system = jdbc_target("postgresql://ada@db:5432/app?sslmode=verify-full&sslrootcert=system")
    assert libpq_url(system.jdbc_url, system.properties) == (
        "postgresql://ada@db:5432/app?sslmode=verify-full&sslrootcert=system")


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql:///test?host=/var/run/postgresql", "TCP address"),
    ("postgresql://postgres@/test", "TCP address"),
    ("mysql://h/db", "postgresql:// or cockroachdb://"),
    ("host=/var/run/postgresql dbname=test", "TCP address"),
    ("host=h1 dbname=db target_session_attrs=prefer-primary", "no JDBC equivalent"),
    ("jdbc:mysql://h/db", "jdbc:postgresql://"),
])
def test_urls_jdbc_cannot_use_are_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        jdbc_target(url)


def test_postgresql_writer_options() -> None:
    options = writer_options(jdbc_target("postgresql://ada:pw@db:5432/app"), "shardq.tasks")
    assert options == {
        "url": "jdbc:postgresql://db:5432/app",
        "dbtable": "shardq.tasks",
        "driver": "org.postgresql.Driver",
        "user": "ada",
        "password": "pw",
        "stringtype": "unspecified",  # strings reach uuid and jsonb columns
        "reWriteBatchedInserts": "true",
        "batchsize": str(POSTGRESQL_BATCH_SIZE),
        "isolationLevel": "READ_COMMITTED",  # a partition is one transaction
        "ApplicationName": "shardq-spark",
    }


def test_cockroachdb_writer_options_follow_its_pgjdbc_guidance() -> None:
    """Batches of 128 rows (pgjdbc rewrites them into one multi-row INSERT), each
    committed alone as an implicit transaction CockroachDB retries itself."""
    options = writer_options(jdbc_target("cockroachdb://root@crdb:26257/shardq?sslmode=disable"),
                             "shardq.spark_stage_x")
    assert COCKROACHDB_BATCH_SIZE == 128
    assert options["url"] == "jdbc:postgresql://crdb:26257/shardq?sslmode=disable"
    assert options["batchsize"] == "128"
    assert options["reWriteBatchedInserts"] == "true"
    assert options["isolationLevel"] == "NONE"
    assert options["stringtype"] == "unspecified"
    assert options["driver"] == "org.postgresql.Driver"
    assert options["user"] == "root"
    # A postgresql:// URL that turns out to reach CockroachDB gets the same settings.
    detected = writer_options(jdbc_target("postgresql://root@crdb:26257/shardq"), "t",
                              dialect="cockroachdb")
    assert detected["batchsize"] == "128"
    assert detected["isolationLevel"] == "NONE"


def test_batch_size_and_extra_options_override() -> None:
    target = jdbc_target("postgresql://u@h/db")
    options = writer_options(target, "t", batch_size=777, extra={"isolationLevel": "NONE",
                                                                  "queryTimeout": "30"})
    assert (options["batchsize"], options["isolationLevel"], options["queryTimeout"]) == (
        "777", "NONE", "30")
    with pytest.raises(ConfigError):
        writer_options(target, "t", batch_size=-1)
    with pytest.raises(ConfigError):
        writer_options(target, "t", dialect="mysql")


def test_task_ids_are_uuid5_of_the_queue_and_natural_key() -> None:
    got = task_id("invoices", "INV-1", None)
    assert got == uuid.uuid5(SPARK_NAMESPACE, '["invoices","INV-1",null]')
    assert got.version == 5
    assert got.variant == uuid.RFC_4122
    assert task_id("a", "1") != task_id("b", "1") != task_id("a", "1", namespace=uuid.uuid4())
    assert task_id("q", "naïve") == uuid.uuid5(SPARK_NAMESPACE, '["q","naïve"]')


@pytest.fixture(scope="module")
def pglast() -> Any:
    return pytest.importorskip("pglast", reason="pglast (PostgreSQL's parser) is not installed")


def rendered(idempotent: bool) -> str:
    stage = new_stage_name()
    assert re.fullmatch(r"spark_stage_[0-9a-f]{16}", stage)
    return merge_query(stage, idempotent=idempotent).as_string(None)


@pytest.mark.parametrize("idempotent", [False, True])
def test_merge_is_one_statement_over_insert_rows(pglast: Any, idempotent: bool) -> None:
    text = rendered(idempotent)
    assert not re.search(r"\{\w+\}", re.sub(r"--[^\n]*", "", text)), "a placeholder is unfilled"
    assert "INSERT INTO shardq.tasks AS t" in text  # insert_rows, with its coalescing
    assert "ON CONFLICT (queue, key) WHERE key IS NOT NULL" in text
    assert re.search(r'FROM "shardq"\."spark_stage_[0-9a-f]{16}" AS s', text)
    assert ("INSERT INTO shardq.spark_ledger" in text) is idempotent
    assert "ctid" not in text  # CockroachDB has neither
    assert "MATERIALIZED" not in text
    parsed = pglast.parse_sql(text.replace("%(now)s", "NULL"))
    assert len(parsed) == 1


@pytest.mark.parametrize(("idempotent", "stream"), [(False, False), (True, False), (True, True)])
def test_a_batch_merge_names_the_flow_and_its_callback_in_each_task(
        pglast: Any, idempotent: bool, stream: bool) -> None:
    """With on_complete every merge inserts through insert_batch: each task names the
    batch's flow and its callback, no row coalesces, and it stays one statement that
    says whether the ledger took its rows."""
    text = merge_query(new_stage_name(), idempotent=idempotent, stream=stream,
                       batch=True).as_string(None)
    assert not re.search(r"\{\w+\}", re.sub(r"--[^\n]*", "", text)), "a placeholder is unfilled"
    assert "flow_id, flow_next)" in text
    assert "%(flow_id)s::uuid,\n       ARRAY[%(callback_id)s::uuid]" in text
    assert "ON CONFLICT (queue, key)" not in text
    assert "AS taken" in text
    bound = {"%(now)s": "NULL", "%(batch)s": "NULL", "%(flow_id)s": "NULL",
             "%(callback_id)s": "NULL"}
    assert len(pglast.parse_sql(re.sub(r"%\(\w+\)s", lambda m: bound[m.group(0)], text))) == 1
    plain = merge_query(new_stage_name(), idempotent=idempotent, stream=stream).as_string(None)
    assert "flow_next" not in plain


app = shardq.App()


@app.task(queue="done")
def done(counts: dict[str, Any], label: str) -> None:
    """A batch's callback."""


@pytest.mark.parametrize(("arguments", "message"), [
    ({"on_complete": "done"}, "on_complete takes a signature (fn.s(...) or fn.si(...)), "
                              "got 'done'"),
    ({"on_complete": done.s("x"), "key": "k"},
     "a write with on_complete takes no key: a keyed row may merge into another task of "
     "its key, which is not the batch's"),
])
def test_on_complete_is_a_signature_without_key(arguments: dict[str, Any], message: str) -> None:
    """Refused before Spark or the database is touched, in one line."""
    with pytest.raises(InvalidTask) as refused:
        write_tasks(object(), dsn="postgresql://h/db", queue="q", payload="p", **arguments)
    assert str(refused.value) == message


@pytest.mark.parametrize(("arguments", "message"), [
    ({"on_complete": 3}, "on_complete takes a signature (fn.s(...) or fn.si(...)) or a "
                         "function of the micro-batch id that returns one, got 3"),
    ({"on_complete": lambda batch_id: done.s(str(batch_id)), "key": "k"},
     "a write with on_complete takes no key: a keyed row may merge into another task of "
     "its key, which is not the batch's"),
])
def test_a_streams_on_complete_is_a_signature_or_a_function_of_the_batch(
        arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidTask) as refused:
        write_stream_tasks(object(), dsn="postgresql://h/db", queue="q", payload="p",
                           checkpoint_location="/tmp/x", **arguments)
    assert str(refused.value) == message


def test_a_micro_batchs_callback() -> None:
    from shardq.spark.complete import of_batch

    assert of_batch(done.s("all"), 7) == done.s("all")
    assert of_batch(lambda batch_id: done.s(f"batch {batch_id}"), 7) == done.s("batch 7")
    def nothing(batch_id: int) -> Any:
        return None

    with pytest.raises(InvalidTask) as refused:
        of_batch(nothing, 7)
    assert str(refused.value) == ("on_complete(7) must return a signature (fn.s(...) or "
                                  "fn.si(...)), got None")


def test_spark_sql_files_load_and_have_no_placeholder_in_comments() -> None:
    for name in ("stage_create", "stage_drop", "rows", "rows_new", "new_ids", "new_batch",
                 "merge", "merge_fresh", "merge_stream", "ledger_exists", "ledger_prune",
                 "insert_batch"):
        text = sqlfiles.text(f"spark/{name}")
        for line in text.splitlines():
            assert "{" not in line.partition("--")[2], f"{name}: {line}"


@pytest.mark.parametrize("dialect", ["postgresql", "cockroachdb"])
def test_the_ledger_migration_is_one_rerunnable_statement(dialect: str) -> None:
    if dialect == "cockroachdb":
        pytest.importorskip("sqlalchemy_cockroachdb", reason="sqlalchemy-cockroachdb is missing")
    out = io.StringIO()
    migrate.upgrade(None, sql=True, dialect=dialect, bucket_count=16, output=out)
    script = out.getvalue().partition("-- Running upgrade 0007 -> 0008")[2]
    script = script.partition("-- Running upgrade 0008 -> ")[0]
    statements = [s.strip() for s in re.sub(r"--[^\n]*", "", script).split(";") if s.strip()]
    ddl = [s for s in statements
           if s not in ("BEGIN", "COMMIT") and "shardq_alembic_version" not in s]
    assert ddl == ["CREATE TABLE IF NOT EXISTS shardq.spark_ledger (id uuid NOT NULL "
                   "PRIMARY KEY, merged_at timestamptz NOT NULL DEFAULT now())"]


def test_the_driver_and_the_executors_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    from shardq.spark.write import _addresses

    dsn, target = _addresses(None, "postgresql://a:b@db:5432/app?sslmode=require", None)
    assert dsn == "postgresql://a:b@db:5432/app?sslmode=require"
    assert target.jdbc_url == "jdbc:postgresql://db:5432/app?sslmode=require"
    # The executors may reach the database under another address than the driver.
    dsn, target = _addresses("jdbc:postgresql://10.0.0.5:5432/app?user=a", "postgresql://a@db/app",
                             None)
    assert (dsn, target.jdbc_url) == ("postgresql://a@db/app",
                                      "jdbc:postgresql://10.0.0.5:5432/app?user=a")
    dsn, _ = _addresses("jdbc:postgresql://db:5432/app", None, {"user": "a", "password": "b"})
    assert dsn == "postgresql://a:b@db:5432/app"
    monkeypatch.setenv("SHARDQ_DSN", "cockroachdb://root@crdb:26257/q")
    assert _addresses(None, None, None)[1].dialect == "cockroachdb"
    monkeypatch.delenv("SHARDQ_DSN")
    with pytest.raises(ConfigError, match="name the database"):
        _addresses(None, None, None)


def test_appends_go_straight_into_the_table_only_on_postgresql() -> None:
    """CockroachDB's writer commits each batch alone: its appends are staged, so that the
    merge is their one transaction."""
    from shardq.spark.write import is_direct

    plain = {"key": None, "run_at": None, "priority": None}
    assert is_direct("append", "postgresql", **plain)
    assert is_direct("append", "postgresql", **{**plain, "priority": 0})
    assert not is_direct("append", "cockroachdb", **plain)
    assert not is_direct("idempotent", "postgresql", **plain)
    assert not is_direct("append", "postgresql", **{**plain, "priority": 5})
    assert not is_direct("append", "postgresql", **{**plain, "key": "k"})


# Lines of Py4JJavaError texts Spark raised for refused rows (their Java frames cut).
NOT_NULL_TEXT = (
    "An error occurred while calling o101.save.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage "
    "0.0 failed 2 times, most recent failure: Lost task 1.1 in stage 0.0 (TID 2): "
    "java.sql.BatchUpdateException: Batch entry 0 INSERT INTO shardq.tasks (\"queue\","
    "\"payload\",\"max_attempts\") VALUES (('q'),(NULL),('10'::int4)) was aborted: ERROR: "
    "null value in column \"payload\" of relation \"tasks\" violates not-null constraint\n"
    "  Detail: Failing row contains (q, available, 2026-11-27 23:42:50+00, ...).\n"
    "\tat org.postgresql.jdbc.BatchResultHandler.handleError(BatchResultHandler.java:165)\n"
    "Caused by: org.postgresql.util.PSQLException: ERROR: null value in column \"payload\" "
    "of relation \"tasks\" violates not-null constraint\n")


@pytest.mark.parametrize(("text", "broken"), [
    (NOT_NULL_TEXT, ("payload", "must not be null")),
    # PostgreSQL before 13 names no relation; task_group is the argument group.
    ('ERROR: null value in column "task_group" violates not-null constraint',
     ("group", "must not be null")),
    ('ERROR: new row for relation "tasks" violates check constraint "tasks_key_check"\n'
     "  Detail: Failing row contains (...)", ("key", "must be 1 to 512 characters")),
    ('violates check constraint "tasks_attempts_check"',
     ("max_attempts", "must be between 1 and 2147483647")),
    ('violates check constraint "tasks_queue_check"',
     ("queue", "must be 1-128 letters, digits, '_', '.', ':' or '-', starting with a letter "
               "or digit")),
    ("Caused by: org.postgresql.util.PSQLException: ERROR: invalid input syntax for type "
     "json\n  Detail: Token \"not\" is invalid.", ("payload", "must be JSON text")),
    ("org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] shardq: priority: must "
     "be between -2147483647 and 2147483647 SQLSTATE: P0001\n== DataFrame ==",
     ("priority", "must be between -2147483647 and 2147483647")),
    ('violates check constraint "tasks_head_start_check"', None),  # no argument sets it
    ("java.net.ConnectException: Connection refused", None),
])
def test_a_refused_rows_argument_and_rule_from_sparks_text(
        text: str, broken: tuple[str, str] | None) -> None:
    from shardq.spark.failure import broken_rule

    assert broken_rule(text) == broken


@pytest.mark.parametrize(("text", "line"), [
    ("java.sql.BatchUpdateException: Batch entry 0 INSERT INTO shardq.tasks VALUES (...) "
     "was aborted: ERROR: permission denied for table tasks\n"
     "Caused by: org.postgresql.util.PSQLException: ERROR: permission denied for table tasks\n",
     "ERROR: permission denied for table tasks"),
    ("An error occurred while calling o272.save.\n: org.apache.spark.SparkNumberFormatException:"
     " [CAST_INVALID_INPUT] The value 'x' of the type \"STRING\" cannot be cast to \"INT\".\n"
     "== DataFrame ==\n", "[CAST_INVALID_INPUT] The value 'x' of the type \"STRING\" cannot "
                          "be cast to \"INT\"."),
    ("org.apache.spark.SparkException: Job aborted.\n\tat org.apache.spark.rdd.RDD\n"
     "Caused by: org.postgresql.util.PSQLException: Connection to 127.0.0.1:1 refused.\n"
     "Caused by: java.net.ConnectException: Connection refused\n",
     "java.net.ConnectException: Connection refused"),
    ("\n  lost: " + "x" * 1000, "lost: " + "x" * 294),
    # pgjdbc refusing the server's certificate (verify-full): its CA, or the name in it.
    ("Caused by: org.postgresql.util.PSQLException: SSL error: PKIX path validation failed: "
     "java.security.cert.CertPathValidatorException: Path does not chain with any of the "
     "trust anchors\nCaused by: javax.net.ssl.SSLHandshakeException: PKIX path validation\n",
     "the server's certificate was refused over JDBC (is sslrootcert the CA that signed it, "
     "for the host in the URL?): SSL error: PKIX path validation failed: java.security.cert."
     "CertPathValidatorException: Path does not chain with any of the trust anchors"),
    ("Caused by: org.postgresql.util.PSQLException: The hostname db.example.com could not be "
     "verified by hostnameverifier PgjdbcHostnameVerifier.\n",
     "the server's certificate was refused over JDBC (is sslrootcert the CA that signed it, "
     "for the host in the URL?): The hostname db.example.com could not be verified by "
     "hostnameverifier PgjdbcHostnameVerifier."),
])
def test_any_other_spark_failure_in_one_line(text: str, line: str) -> None:
    from shardq.spark.failure import summary

    assert summary(text) == line
