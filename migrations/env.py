"""Alembic environment for shardq.

The database is named by ``-x dsn=...`` or the ``SHARDQ_DSN`` environment variable
(a libpq URL such as ``postgresql://user@host/db``; ``cockroachdb://`` selects the
CockroachDB dialect, which is also detected from the server itself).  The bucket
count of a new schema comes from ``-x buckets=N`` or ``SHARDQ_BUCKET_COUNT``.

Every revision holds one DDL statement and runs in its own transaction, as
CockroachDB asks of schema changes; each statement is written to be re-runnable.
"""

from __future__ import annotations

import os

import psycopg
from alembic import context
from psycopg import sql
from sqlalchemy import Connection, Engine, create_engine, pool, text

from shardq.core import dialect
from shardq.core.boundary import normalize_dsn
from shardq.core.config import DEFAULT_BUCKET_COUNT
from shardq.core.migrate import ddl
from shardq.core.rules import MAX_BUCKET_COUNT

VERSION_TABLE = "shardq_alembic_version"


def _x(name: str) -> str | None:
    value: str | None = context.get_x_argument(as_dictionary=True).get(name)
    return value


def _dialect_url(dsn: str) -> str:
    """The SQLAlchemy URL that names the dialect of ``dsn``, and nothing else: libpq
    reads the DSN itself (see :func:`_engine`).  ``cockroachdb://`` selects
    CockroachDB's; a ``postgresql://`` URL or libpq's ``key=value`` settings PostgreSQL's."""
    scheme, sep, _ = dsn.partition("://")
    if sep and scheme.startswith("cockroachdb"):
        return "cockroachdb+psycopg://"
    if sep and scheme not in ("postgres", "postgresql", "postgresql+psycopg"):
        raise SystemExit(f"shardq: unsupported DSN scheme {scheme!r}")
    return "postgresql+psycopg://"


def _engine(dsn: str, url: str) -> Engine:
    """An engine of dialect ``url`` whose connections libpq opens from ``dsn`` as it is.

    SQLAlchemy's own URL parser reads one host and one port: a multi-host URL
    (``postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write``, for a
    failover pair) or libpq's ``key=value`` settings would not reach libpq whole.
    """
    libpq = normalize_dsn(dsn)
    return create_engine(url, poolclass=pool.NullPool,
                         creator=lambda: psycopg.connect(libpq))


def _dsn() -> str:
    dsn = _x("dsn") or context.config.attributes.get("dsn") or os.environ.get("SHARDQ_DSN")
    if not dsn:
        raise SystemExit(
            "shardq: name the database with SHARDQ_DSN=postgresql://... or alembic -x dsn=..."
        )
    return str(dsn)


def _bucket_count() -> int:
    raw = (
        _x("buckets")
        or context.config.attributes.get("bucket_count")
        or os.environ.get("SHARDQ_BUCKET_COUNT")
        or DEFAULT_BUCKET_COUNT
    )
    count = int(raw)
    if not 1 <= count <= MAX_BUCKET_COUNT:
        raise SystemExit(
            f"shardq: the bucket count must be between 1 and {MAX_BUCKET_COUNT}, got {count}")
    return count


def _bucket_column() -> str:
    """The column revisions index buckets by: PostgreSQL's ``bucket``, or CockroachDB's
    hidden shard column (the primary key's columns sorted by name), read from the
    table when it exists, since its bucket count may differ from this run's setting."""
    if context.get_context().dialect.name != "cockroachdb":
        return "bucket"
    count = context.config.attributes["bucket_count"]
    configured = dialect.COCKROACHDB.new_bucket_column(count)
    if context.is_offline_mode():
        return configured
    found = context.get_bind().execute(text(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'shardq' "
        "AND table_name = 'tasks' AND column_name LIKE 'crdb_internal_%shard_%'"
    )).scalars().all()
    return str(found[0]) if len(found) == 1 else configured


def _drop_index(name: str) -> str:
    """DROP INDEX for an index of shardq.tasks, in the engine's syntax."""
    if context.get_context().dialect.name == "cockroachdb":
        return ddl("DROP INDEX IF EXISTS shardq.tasks@{name}", name=sql.SQL(name))
    return ddl("DROP INDEX IF EXISTS shardq.{name}", name=sql.SQL(name))


# What revisions ask of the environment.
context.config.attributes.update(
    bucket_count=_bucket_count(), bucket_column=_bucket_column, drop_index=_drop_index
)


def run_migrations_offline() -> None:
    """Render the DDL as SQL text (``alembic upgrade head --sql``)."""
    context.configure(
        url=_dialect_url(_dsn()),
        literal_binds=True,
        version_table=VERSION_TABLE,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _engine_url(dsn: str) -> str:
    """Switch to the CockroachDB dialect when the server turns out to be CockroachDB."""
    url = _dialect_url(dsn)
    if url.startswith("cockroachdb"):
        return url
    probe = _engine(dsn, url)
    try:
        with probe.connect() as conn:
            version = str(conn.exec_driver_sql("SELECT version()").scalar())
    finally:
        probe.dispose()
    return "cockroachdb+psycopg://" if "CockroachDB" in version else url


def run_migrations_online() -> None:
    """Apply the migrations to the database."""
    dsn = _dsn()
    engine = _engine(dsn, _engine_url(dsn))
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            version_table=VERSION_TABLE,
            transaction_per_migration=True,
        )
        _forget_a_dropped_schema(connection)
        with context.begin_transaction():
            context.run_migrations()
        _drop_the_version_table_at_base(connection)
    engine.dispose()


def _drop_the_version_table_at_base(connection: Connection) -> None:
    """``alembic downgrade base`` removes everything shardq made, the version table too
    (Alembic itself leaves it behind, empty, in ``public``).  A read of the revision
    (``dont_mutate``) changes nothing."""
    migration = context.get_context()
    if migration.opts.get("dont_mutate") or migration.get_current_heads():
        return
    connection.execute(text(ddl("DROP TABLE IF EXISTS {table}",
                                table=sql.Identifier(VERSION_TABLE))))
    connection.commit()


def _forget_a_dropped_schema(connection: Connection) -> None:
    """A schema dropped by hand (``DROP SCHEMA shardq CASCADE``) leaves the version table
    behind, which lives outside it: the schema would then count as up to date and never
    come back.  Without the tasks table, the migrations start again from the beginning."""
    migration = context.get_context()
    if not migration.get_current_heads():
        return
    found = connection.execute(text("SELECT to_regclass('shardq.tasks') IS NOT NULL")).scalar()
    if not found:
        migration.stamp(context.script, "base")
        connection.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
