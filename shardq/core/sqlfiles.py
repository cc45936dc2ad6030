"""Named SQL files, loaded once and composed with psycopg.sql.

Each query lives in ``sql/<name>.sql``; a file in ``sql/<dialect>/`` overrides the
shared one for that engine.  Templates take ``{placeholders}`` that are filled only
with identifiers (the bucket column), literals (the row limit, constants of the code
such as :data:`shardq.ops.flow.LISTED_SLOTS`) and fragments shardq controls, never
with user input; values always travel as bound parameters.  A file used twice in one
statement with different identifiers in it is a :class:`Part` where it is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import TypeVar

from psycopg import sql

from shardq.core.dialect import DIALECTS, bucket_expression, expression_count


@cache
def _root() -> Traversable:
    packaged = resources.files("shardq") / "sql"
    if packaged.is_dir():
        return packaged
    # A source checkout (editable install): the files sit at the top level.
    return Path(__file__).resolve().parents[2] / "sql"


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
    "claim_where": "claim_where",
    "claim_range": "claim_range",
    "layout_guard": "layout_guard",
    "this_bucket": "bucket_bound",
    "claim_slots": "claim_slots",
    "claim_free": "claim_free",
    "acked": "acked",
    "rate_granted": "rate_granted",
    "rate_guard": "rate_unset",
    "claim_set": "claim_set",
    "claim_returning": "claim_returning",
    "claim_columns": "claim_columns",
    "rescue_where": "rescue_where",
    "rescue_set": "rescue_set",
    "promote_where": "promote_where",
    "promote_set": "promote_set",
    "suspect": "suspect",
    "rescue_dies": "rescue_dies",
    "rescue_error": "rescue_error",
    "throughput_add": "throughput_add",
    "task_columns": "task_columns",
    "order": "order_earliest",
    "sample_states": "sample_states",
    "notified": "batch_notify",
    "results_notify": "results_notify",
    "attempts_add": "attempts_add",
    "rescue_ended": "rescue_ended",
    "flow_events_add": "flow_events_add",
    "flow_notify": "flow_notify",
    "steps_drop": "steps_drop",
}


Identifiers = tuple[tuple[str, tuple[str, ...]], ...]
Literals = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Part:
    """A file composed into a placeholder with placeholders of its own filled for this
    use only (and in the files it includes): ``parts`` with other files, ``names`` with
    quoted identifiers, ``literals`` with numbers.  One file then serves twice in one
    statement, say for the queue's column and for the group's."""

    file: str
    parts: tuple[tuple[str, str], ...] = ()
    names: Identifiers = ()
    literals: Literals = ()


Names = tuple[tuple[str, str | Part], ...]
V = TypeVar("V")


def _merged(outer: tuple[tuple[str, V], ...], inner: tuple[tuple[str, V], ...]
            ) -> tuple[tuple[str, V], ...]:
    """``outer``'s bindings with ``inner``'s over them, in one order (a cache key)."""
    return tuple(sorted({**dict(outer), **dict(inner)}.items()))


def _without_heading(source: str) -> str:
    """A fragment's text without its leading comment lines (they document the file)."""
    lines = source.splitlines()
    while lines and lines[0].lstrip().startswith("--"):
        lines.pop(0)
    return "\n".join(lines)


def _fragment(file: str | Part, dialect: str, bucket: str, limit: int | None,
              fragments: Names, identifiers: Identifiers, literals: Literals) -> sql.Composed:
    """``file`` composed into a placeholder; a :class:`Part` with its own bindings over
    the statement's."""
    if isinstance(file, Part):
        return query(file.file, dialect, bucket, limit, fragment=True,
                     fragments=_merged(fragments, file.parts),
                     identifiers=_merged(identifiers, file.names),
                     literals=_merged(literals, file.literals))
    return query(file, dialect, bucket, limit, fragments=fragments, identifiers=identifiers,
                 literals=literals, fragment=True)


_QUALIFIED_BUCKET = re.compile(r"\b(\w+)\.\{bucket\}")


def bucket_of(bucket: str, alias: str | None = None) -> sql.Composable:
    """A task row's bucket as a statement names it, qualified by the row's table
    ``alias`` (a word of the statement's own text, kept as written) if given: the
    layout's bucket column ``bucket``, or for an expression layout
    (:func:`shardq.core.dialect.expression_bucket`) the bucket formula over the row's
    id.  Every statement's bucket is written here, and every index that carries one
    (see shardq.ops.reshard)."""
    count = expression_count(bucket)
    name = sql.Identifier("id" if count is not None else bucket)
    column = name if alias is None else sql.Composed([sql.SQL(alias), sql.SQL("."), name])
    if count is None:
        return column
    return bucket_expression(column, count)


@lru_cache(maxsize=512)
def query(name: str, dialect: str, bucket: str, limit: int | None = None, *,
          fragments: Names = (), identifiers: Identifiers = (), literals: Literals = (),
          fragment: bool = False) -> sql.Composed:
    """Query ``name`` composed for one engine, bucket column and (where used) row limit.

    ``fragments`` maps placeholders to other files than :data:`FRAGMENTS` names, or to
    a :class:`Part` (at every depth of the composition); ``identifiers`` fills
    placeholders with quoted identifiers (a name and its qualifiers, such as a staging
    table's schema and name), ``literals`` with numbers.
    """
    source = _without_heading(text(name, dialect)) if fragment else text(name, dialect)
    files: dict[str, str | Part] = {**FRAGMENTS, **dict(fragments)}
    parts: dict[str, sql.Composable] = {
        placeholder: _fragment(file, dialect, bucket, limit, fragments, identifiers, literals)
        for placeholder, file in files.items() if "{" + placeholder + "}" in source
    }
    values: dict[str, sql.Composable] = {
        **{placeholder: sql.Identifier(*names) for placeholder, names in identifiers},
        **{placeholder: sql.Literal(int(value)) for placeholder, value in literals}}
    parts.update((p, v) for p, v in values.items() if "{" + p + "}" in source)
    # A row's bucket, bare or qualified by its table's alias (``t.{bucket}``), is
    # written by bucket_of alone.
    aliases = set(_QUALIFIED_BUCKET.findall(source))
    source = _QUALIFIED_BUCKET.sub(lambda m: "{bucket_of_" + m[1] + "}", source)
    parts.update(("bucket_of_" + alias, bucket_of(bucket, alias)) for alias in aliases)
    if "{bucket}" in source:
        parts["bucket"] = bucket_of(bucket)
    if "{limit}" in source:
        if limit is None:
            raise ValueError(f"query {name!r} needs a limit")
        parts["limit"] = sql.Literal(int(limit))
    return sql.SQL(source).format(**parts)


@lru_cache(maxsize=512)
def compiled(name: str, dialect: str, bucket: str, limit: int | None = None, *,
             fragments: Names = (), identifiers: Identifiers = ()) -> bytes:
    """:func:`query` as the bytes the driver sends.  A composed query is joined from its
    parts again on every execution; a worker runs a few thousand statements a second."""
    return query(name, dialect, bucket, limit, fragments=fragments,
                 identifiers=identifiers).as_bytes(None)


@cache
def plain(name: str, **identifiers: str) -> sql.Composed:
    """A query that takes no bucket column, limit nor fragment (server checks and the
    like): its file's text with ``identifiers`` (placeholder → name) quoted in."""
    return sql.SQL(text(name)).format(**{k: sql.Identifier(v) for k, v in identifiers.items()})


def console(name: str) -> sql.SQL:
    """A command of PgBouncer's admin console (``SHOW ...``), which takes no comments: its
    file's text without the heading."""
    return sql.SQL(_without_heading(text(name)).strip())
