"""Apply shardq's Alembic migrations from Python or the CLI (no checkout needed)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TextIO

from alembic import command
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from psycopg import sql
from psycopg.errors import InsufficientPrivilege
from sqlalchemy.exc import OperationalError, ProgrammingError

from shardq.core.boundary import connection_cause, normalize_dsn, role_of
from shardq.core.errors import ConfigError, PermissionDenied, Unavailable


def ddl(template: str, **parts: sql.Composable) -> str:
    """A revision's statement: ``template`` with its ``{name}`` parts filled in by
    psycopg.sql, as the text Alembic runs, rendered without a connection so that
    ``shardq migrate --sql`` prints it too.

    The names the helpers below put in are the revisions' own constants, written bare
    (:class:`psycopg.sql.SQL`, not quoted as identifiers): every revision's statement
    stays the text it was when it shipped."""
    return sql.SQL(template).format(**parts).as_string(None)


def listed(values: Iterable[str]) -> sql.Composed:
    """``values`` as a list of SQL literals, for a CHECK's ``IN (...)``."""
    return sql.SQL(", ").join(sql.Literal(v) for v in values)


def add_columns(table: str, definitions: Iterable[str]) -> str:
    """One ALTER TABLE that adds each column of ``definitions`` (name, type and
    constraints, as SQL) to ``shardq.<table>`` unless it is there."""
    adds = (sql.SQL("ADD COLUMN IF NOT EXISTS {}").format(sql.SQL(d)) for d in definitions)
    return ddl("ALTER TABLE shardq.{table} {adds}", table=sql.SQL(table),
               adds=sql.SQL(", ").join(adds))


def drop_columns(table: str, names: Iterable[str]) -> str:
    """One ALTER TABLE that drops each column of ``names`` from ``shardq.<table>``."""
    drops = (sql.SQL("DROP COLUMN IF EXISTS {}").format(sql.SQL(n)) for n in names)
    return ddl("ALTER TABLE shardq.{table} {drops}", table=sql.SQL(table),
               drops=sql.SQL(", ").join(drops))


def check_in(table: str, name: str, column: str, values: Iterable[str]) -> str:
    """Replace ``shardq.<table>``'s check ``name`` with ``column IN (values)``, in one
    statement, so that the check keeps its name and a re-run does the same again."""
    return ddl("ALTER TABLE shardq.{table} DROP CONSTRAINT IF EXISTS {name}, "
               "ADD CONSTRAINT {name} CHECK ({column} IN ({values}))",
               table=sql.SQL(table), name=sql.SQL(name), column=sql.SQL(column),
               values=listed(values))


def primary_key(column: str, hash_buckets: int | None) -> sql.Composed:
    """A table's primary key on ``column``; hash-sharded over ``hash_buckets`` buckets
    when given (CockroachDB)."""
    key = sql.SQL("PRIMARY KEY ({})").format(sql.SQL(column))
    if hash_buckets is None:
        return key
    return sql.SQL("{} USING HASH WITH (bucket_count = {})").format(
        key, sql.Literal(int(hash_buckets)))


@cache
def migrations_dir() -> Path:
    """The migrations shipped in the wheel, or those of a source checkout."""
    package = Path(__file__).resolve().parent.parent  # shardq/
    packaged = package / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    return package.parent / "migrations"


def alembic_config(dsn: str | None, *, bucket_count: int | None = None,
                   dialect: str | None = None, output: TextIO | None = None) -> Config:
    """An Alembic Config for shardq's migrations against ``dsn``."""
    config = Config(stdout=output or sys.stdout, output_buffer=output or sys.stdout)
    config.set_main_option("script_location", str(migrations_dir()))
    if dsn:
        config.attributes["dsn"] = dsn if dialect != "cockroachdb" else _crdb(dsn)
    elif dialect:
        config.attributes["dsn"] = f"{dialect}://offline/shardq"
    if bucket_count is not None:
        config.attributes["bucket_count"] = bucket_count
    return config


def _crdb(dsn: str) -> str:
    return "cockroachdb://" + normalize_dsn(dsn).partition("://")[2]


def upgrade(dsn: str | None, *, bucket_count: int | None = None, sql: bool = False,
            dialect: str | None = None, revision: str = "head",
            output: TextIO | None = None) -> None:
    """Bring the schema up to ``revision``; with ``sql`` only print the DDL."""
    config = alembic_config(dsn, bucket_count=bucket_count, dialect=dialect, output=output)
    with _one_line(dsn):
        command.upgrade(config, revision, sql=sql)


# What a role needs to run the migrations, beyond what a role granted their use has.
OWNER_FIX = ("run `shardq migrate` as the schema's owner, a role with CREATE on the database "
             "(for the schema shardq) and on the schema public (for the table "
             "shardq_alembic_version)")


@contextmanager
def _one_line(dsn: str | None) -> Iterator[None]:
    """Alembic's errors that are the user's to fix (an unknown revision, a database that
    does not answer, a role that may not change the schema) as shardq's, which the CLI
    prints as one line."""
    try:
        yield
    except CommandError as exc:
        raise ConfigError(f"migrate: {exc}") from exc
    except OperationalError as exc:
        first = connection_cause(exc.orig, dsn or "") if isinstance(
            exc.orig, BaseException) else type(exc.orig).__name__
        raise Unavailable(f"migrate: {first}") from exc  # libpq's words, no hints
    except ProgrammingError as exc:
        if not isinstance(exc.orig, InsufficientPrivilege):
            raise
        refused = exc.orig.diag.message_primary or str(exc.orig).strip()
        raise PermissionDenied(f"migrate: {refused}", role_of(dsn) if dsn else None,
                               OWNER_FIX) from exc


def head() -> str:
    """The newest revision shipped with this shardq."""
    return str(ScriptDirectory.from_config(alembic_config(None)).get_current_head())


def current(dsn: str) -> str | None:
    """The revision the schema of ``dsn`` is at; None before the first migration."""
    config = alembic_config(dsn)
    script = ScriptDirectory.from_config(config)
    found: list[str] = []

    def read(rev: object, context: MigrationContext) -> list[object]:
        found.extend(context.get_current_heads())
        return []  # nothing to apply: only read

    with _one_line(dsn), EnvironmentContext(config, script, fn=read, dont_mutate=True):
        script.run_env()
    return found[0] if found else None


def downgrade(dsn: str, *, revision: str = "base") -> None:
    """Take the schema down to ``revision`` (``base`` drops everything shardq made)."""
    command.downgrade(alembic_config(dsn), revision)
