"""Apply shardq's Alembic migrations from Python or the CLI (no checkout needed)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
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
from sqlalchemy.exc import OperationalError

from shardq.core.boundary import normalize_dsn
from shardq.core.errors import ConfigError, Unavailable
from shardq.core.redaction import redact


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
    with _one_line():
        command.upgrade(config, revision, sql=sql)


@contextmanager
def _one_line() -> Iterator[None]:
    """Alembic's errors that are the user's to fix (an unknown revision, a database that
    does not answer) as shardq's, which the CLI prints as one line."""
    try:
        yield
    except CommandError as exc:
        raise ConfigError(f"migrate: {exc}") from exc
    except OperationalError as exc:
        first = (str(exc.orig).strip() or type(exc.orig).__name__).splitlines()[0]
        raise Unavailable(f"migrate: {redact(first)}") from exc  # libpq's words, no hints


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

    with _one_line(), EnvironmentContext(config, script, fn=read, dont_mutate=True):
        script.run_env()
    return found[0] if found else None


def downgrade(dsn: str, *, revision: str = "base") -> None:
    """Take the schema down to ``revision`` (``base`` drops everything shardq made)."""
    command.downgrade(alembic_config(dsn), revision)
