"""The driver's side of a staged Spark write: the staging table and the merge, via psycopg.

Statements live in ``sql/spark/``; the staging table's name is composed in as an
identifier, values travel as bound parameters.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from psycopg import sql

from shardq import sqlfiles
from shardq.db import Conn, Database
from shardq.errors import SchemaNotReady

SCHEMA = "shardq"
STAGE_PREFIX = "spark_stage_"


def _text(name: str) -> str:
    return sqlfiles.text(f"spark/{name}")


def new_stage_name() -> str:
    """A fresh staging table name (unquoted-safe: lower-case letters, digits, ``_``)."""
    return STAGE_PREFIX + uuid.uuid4().hex[:16]


def stage_identifier(name: str) -> sql.Identifier:
    """The staging table ``name`` in shardq's schema, as an identifier."""
    return sql.Identifier(SCHEMA, name)


def merge_query(stage: str, *, idempotent: bool) -> sql.Composed:
    """The merge of staging table ``stage`` into shardq.tasks, one statement.

    ``insert_rows`` (placement and keyed coalescing) reads the staging rows through
    ``rows`` (append) or ``rows_fresh`` (idempotent: only ids the ledger takes now).
    """
    table = stage_identifier(stage)
    rows = sql.SQL(_text("rows_fresh" if idempotent else "rows")).format(stage=table)
    insert = sql.SQL(sqlfiles.text("insert_rows")).format(
        rows=rows, placement=sql.SQL(sqlfiles.text("placement")))
    return sql.SQL(_text("merge_fresh" if idempotent else "merge")).format(
        insert=insert, stage=table)


@dataclass(frozen=True)
class Merged:
    """What a merge did: rows it read, tasks it wrote, and ids new to the ledger."""

    staged: int
    tasks: int
    fresh: int | None


def create_stage(db: Database, stage: str) -> None:
    """Create the (unlogged) staging table."""
    query = sql.SQL(_text("stage_create")).format(stage=stage_identifier(stage))
    db.run(lambda c: c.execute(query))


def drop_stage(db: Database, stage: str) -> None:
    """Drop the staging table, if it is there."""
    query = sql.SQL(_text("stage_drop")).format(stage=stage_identifier(stage))
    db.run(lambda c: c.execute(query))


def merge(db: Database, stage: str, *, idempotent: bool) -> Merged:
    """Merge the staging table into shardq.tasks in one transaction."""
    query = merge_query(stage, idempotent=idempotent)

    def work(conn: Conn) -> Merged:
        with conn.transaction():
            row = conn.execute(query, {"now": None}).fetchone()
        assert row is not None
        return Merged(int(row[0]), int(row[1]), None if row[2] is None else int(row[2]))

    return db.run(work)


def require_ledger(db: Database) -> None:
    """Raise SchemaNotReady unless the ledger of idempotent writes exists."""
    query = _text("ledger_exists")
    found = db.run(lambda c: c.execute(query).fetchone())
    if not found or not found[0]:
        raise SchemaNotReady("the table shardq.spark_ledger (idempotent Spark writes) is missing")


def prune(db: Database, older_than_s: float) -> int:
    """Forget ledger ids merged more than ``older_than_s`` seconds ago; return how many."""
    query = _text("ledger_prune")
    return db.run(lambda c: c.execute(query, {"older_than_s": older_than_s}).rowcount)


def notify(db: Database, queue: str) -> None:
    """Wake LISTENing workers of ``queue`` (PostgreSQL)."""
    query = sqlfiles.text("notify", "postgresql")
    db.run(lambda c: c.execute(query, {"queue": queue}))
