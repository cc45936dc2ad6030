"""The driver's side of a staged Spark write: the staging table and the merge.

Statements live in ``sql/spark/``; the staging table's name is composed in as an
identifier, values travel as bound parameters.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from psycopg import Rollback, sql

from shardq.core import sqlfiles
from shardq.core.boundary import Layout
from shardq.core.db import Conn
from shardq.core.dialect import POSTGRESQL
from shardq.core.errors import PermissionDenied, SchemaNotReady
from shardq.core.statements import Statements
from shardq.flows.canvas import Signature
from shardq.ops.batches import OpenBatch
from shardq.spark import complete

SCHEMA = "shardq"
STAGE_PREFIX = "spark_stage_"
# The staged statements use no bucket column: any layout of an engine composes them alike.
POSTGRESQL_LAYOUT = Layout(POSTGRESQL, "bucket", 1)


def new_stage_name() -> str:
    """A fresh staging table name (unquoted-safe: lower-case letters, digits, ``_``)."""
    return STAGE_PREFIX + uuid.uuid4().hex[:16]


def _staged(layout: Layout, name: str, stage: str, rows: str | None = None,
            is_new: str | None = None, insert: str | None = None) -> sql.Composed:
    """Statement ``spark/<name>`` on staging table ``stage``; ``rows`` names the file that
    feeds insert_rows (instead of the API's unnest of parameter arrays), ``is_new`` the
    condition that picks the staged rows the ledger took (for ``rows_new``), ``insert``
    the file that inserts them instead of insert_rows."""
    fragments = ((("rows", f"spark/{rows}"),) if rows else ()) + (
        (("is_new", f"spark/{is_new}"),) if is_new else ()) + (
        (("insert", f"spark/{insert}"),) if insert else ())
    return sqlfiles.query(f"spark/{name}", layout.dialect.name, layout.bucket_column,
                          fragments=fragments, identifiers=(("stage", (SCHEMA, stage)),))


def merge_query(stage: str, *, idempotent: bool, stream: bool = False, batch: bool = False,
                layout: Layout = POSTGRESQL_LAYOUT) -> sql.Composed:
    """The merge of staging table ``stage`` into shardq.tasks, one statement.

    ``insert_rows`` (placement and keyed coalescing) reads the staging rows through
    ``rows`` (append) or ``rows_new``: only ids the ledger takes now (idempotent,
    ``new_ids``), or all rows if it takes the batch's id (a stream's micro-batch,
    ``new_batch``).  With ``batch`` (``on_complete``), ``insert_batch`` inserts them
    instead, each naming the batch's flow and callback (parameters ``flow_id`` and
    ``callback_id``).
    """
    insert = "insert_batch" if batch else None
    if stream:
        return _staged(layout, "merge_stream", stage, "rows_new", "new_batch", insert)
    if idempotent:
        return _staged(layout, "merge_fresh", stage, "rows_new", "new_ids", insert)
    return _staged(layout, "merge", stage, "rows", insert=insert)


@dataclass(frozen=True)
class Merged:
    """What a merge did: rows it read, tasks it wrote, ids new to the ledger, whether it
    wrote anything new (False: the ledger held every row, or the micro-batch, already),
    and the batch its tasks form (with ``on_complete``; None when nothing was new)."""

    staged: int
    tasks: int
    fresh: int | None
    taken: bool = True
    batch: OpenBatch | None = None


def create_stage(st: Statements, stage: str) -> None:
    """Create the (unlogged) staging table; a role that may not is told its grant."""
    query = _staged(st.layout, "stage_create", stage)
    try:
        st.run(lambda c: c.execute(query))
    except PermissionDenied as exc:
        role = exc.role or "ROLE"
        raise PermissionDenied(exc.refused, exc.role, "a staged write makes its staging table "
                               "in the schema shardq: its owner grants that with `shardq "
                               f"migrate --grants {role} --spark`") from exc


def drop_stage(st: Statements, stage: str) -> None:
    """Drop the staging table, if it is there."""
    query = _staged(st.layout, "stage_drop", stage)
    st.run(lambda c: c.execute(query))


def merge(st: Statements, stage: str, *, idempotent: bool,
          batch: uuid.UUID | None = None, on_complete: Signature | None = None,
          flow_name: str | None = None) -> Merged:
    """Merge the staging table into shardq.tasks in one transaction; with ``batch`` (the
    ledger id of a stream's micro-batch) only if the ledger has not seen that id.

    With ``on_complete`` the same transaction opens a batch (flow ``flow_name``) whose
    callback it is, inserts the rows as its tasks and seals it with their count; a merge
    that writes nothing new (``taken`` false) rolls the batch back.
    """
    query = merge_query(stage, idempotent=idempotent, stream=batch is not None,
                        batch=on_complete is not None, layout=st.layout)

    def work(conn: Conn) -> Merged:
        merged: Merged | None = None
        with conn.transaction() as tx:
            opened = (None if on_complete is None
                      else complete.open_batch(st, on_complete, flow_name, conn))
            params = st.params(batch=batch, **complete.params(opened))
            row = conn.execute(query, params).fetchone()
            assert row is not None
            merged = Merged(int(row[0]), int(row[1]), None if row[2] is None else int(row[2]),
                            bool(row[3]))
            if opened is not None:
                if not merged.taken:  # a re-run: the run that wrote the rows has the callback
                    raise Rollback(tx)
                complete.seal(st, opened, merged.tasks, conn)
                merged = dataclasses.replace(merged, batch=opened)
        assert merged is not None
        return merged

    return st.run(work)


def require_ledger(st: Statements) -> None:
    """Raise SchemaNotReady unless the ledger of idempotent writes exists."""
    found = st.one("spark/ledger_exists")
    if not found or not found[0]:
        raise SchemaNotReady("the table shardq.spark_ledger (idempotent Spark writes) is missing")


def prune(st: Statements, older_than_s: float) -> int:
    """Forget ledger ids merged more than ``older_than_s`` seconds ago; return how many."""
    query = st.query("spark/ledger_prune")
    return st.run(lambda c: c.execute(query, {"older_than_s": older_than_s}).rowcount)


def forget(st: Statements, ledger_id: uuid.UUID) -> None:
    """Delete one id from the ledger (a stream's batch that can no longer run again)."""
    query = st.query("spark/ledger_forget")
    st.run(lambda c: c.execute(query, {"id": ledger_id}))


def notify(st: Statements, queue: str) -> None:
    """Wake LISTENing workers of ``queue``."""
    query = st.query("notify")
    st.run(lambda c: c.execute(query, {"queue": queue}))
