"""Named SQL files, loaded once and composed with psycopg.sql.

Each query lives in ``sql/<name>.sql``; a file in ``sql/<dialect>/`` overrides the
shared one for that engine.  Templates take ``{placeholders}`` that are filled only
with identifiers (the bucket column) or literals and fragments shardq controls,
never with user input; values always travel as bound parameters.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from psycopg import sql

DIALECTS = ("postgresql", "cockroachdb")


@cache
def _root() -> Traversable:
    packaged = resources.files("shardq") / "sql"
    if packaged.is_dir():
        return packaged
    # A source checkout (editable install): the files sit at the top level.
    return Path(__file__).resolve().parent.parent / "sql"


@cache
def text(name: str, dialect: str = "postgresql") -> str:
    """The text of query ``name`` for ``dialect``."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}")
    specific = _root() / dialect / f"{name}.sql"
    source = specific if specific.is_file() else _root() / f"{name}.sql"
    return source.read_text(encoding="utf-8").strip()


@cache
def query(name: str, dialect: str, bucket: str, limit: int | None = None) -> sql.Composed:
    """Query ``name`` composed for one engine, bucket column and (where used) row limit."""
    parts: dict[str, sql.Composable] = {
        "bucket": sql.Identifier(bucket),
        "placement": sql.SQL(text("placement", dialect)),
        "backoff": sql.SQL(text("backoff", dialect)),
    }
    if limit is not None:
        parts["limit"] = sql.Literal(int(limit))
    source = text(name, dialect)
    used = {k: v for k, v in parts.items() if "{" + k + "}" in source}
    return sql.SQL(source).format(**used)
