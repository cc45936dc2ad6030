"""Apply shardq's Alembic migrations from Python or the CLI (no checkout needed)."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import TextIO

from alembic import command
from alembic.config import Config
from alembic.util import CommandError

from shardq.db import normalize_dsn
from shardq.errors import ConfigError


@cache
def migrations_dir() -> Path:
    """The migrations shipped in the wheel, or those of a source checkout."""
    packaged = Path(__file__).resolve().parent / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / "migrations"


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
    try:
        command.upgrade(config, revision, sql=sql)
    except CommandError as exc:  # an unknown revision, say: the user's to fix, in one line
        raise ConfigError(f"migrate: {exc}") from exc


def downgrade(dsn: str, *, revision: str = "base") -> None:
    """Take the schema down to ``revision`` (``base`` drops everything shardq made)."""
    command.downgrade(alembic_config(dsn), revision)
