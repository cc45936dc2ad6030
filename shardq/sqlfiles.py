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


# Placeholders that stand for another file's text: a fragment composed into the query
# (fragments may hold placeholders of their own).
FRAGMENTS = {
    "placement": "placement",
    "source": "placement_params",
    "rows": "rows_unnest",
    "insert": "insert_rows",
    "insert_one": "insert_one",
    "backoff": "backoff",
    "putback": "putback_keyed",
    "locate": "locate",
}


@cache
def query(name: str, dialect: str, bucket: str, limit: int | None = None) -> sql.Composed:
    """Query ``name`` composed for one engine, bucket column and (where used) row limit."""
    source = text(name, dialect)
    parts: dict[str, sql.Composable] = {
        placeholder: query(file, dialect, bucket, limit)
        for placeholder, file in FRAGMENTS.items() if "{" + placeholder + "}" in source
    }
    if "{bucket}" in source:
        parts["bucket"] = sql.Identifier(bucket)
    if "{limit}" in source:
        if limit is None:
            raise ValueError(f"query {name!r} needs a limit")
        parts["limit"] = sql.Literal(int(limit))
    return sql.SQL(source).format(**parts)
