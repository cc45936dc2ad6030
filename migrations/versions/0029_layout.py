"""The layout in use: how many buckets claims visit, and a reshard's progress.

Revision ID: 0029
Revises: 0028

- ``shardq.layout``: one row (``one`` is its key and can only be true).  It holds the
  bucket count claims use, whether the bucket is PostgreSQL's stored column
  (``expression`` false, as migration 0002 made it) or an expression of the id that
  indexes are built over (after ``shardq reshard``), the ``generation`` that each
  switch of a reshard increases, and the reshard's ``phase`` and counts.  Clients
  re-read it at least once a second; every claim checks its generation.  The row is
  written from the table as it is: the count is the modulus of PostgreSQL's ``bucket``
  column, or the count of CockroachDB's shard column, so a schema made with any count
  gets its own.
- ``shardq.workers.generation``: the layout generation a worker claims with, which a
  reshard waits for before it drops the layout it replaced.

Each statement is re-runnable, so a run cut between two of them is simply run again.
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

# The row, with the bucket count of the table as it is, read from the catalog by the
# server itself (so that `shardq migrate --sql` prints a script that is right for any
# count): the modulus of PostgreSQL's stored column, or the count in the name of
# CockroachDB's shard column.
INSERT_POSTGRESQL = (
    "INSERT INTO shardq.layout (bucket_count) "
    "SELECT substring(generation_expression FROM '(\\d+)\\)*\\s*$')::int "
    "FROM information_schema.columns "
    "WHERE table_schema = 'shardq' AND table_name = 'tasks' AND column_name = 'bucket' "
    "ON CONFLICT (one) DO NOTHING")
INSERT_COCKROACHDB = (
    "INSERT INTO shardq.layout (bucket_count) "
    "SELECT substring(column_name FROM '_shard_(\\d+)$')::int "
    "FROM information_schema.columns "
    "WHERE table_schema = 'shardq' AND table_name = 'tasks' "
    "AND column_name LIKE 'crdb\\_internal\\_%\\_shard\\_%' ORDER BY column_name LIMIT 1 "
    "ON CONFLICT (one) DO NOTHING")


def _cockroachdb() -> bool:
    return bool(op.get_context().dialect.name == "cockroachdb")


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.layout ("
        "one boolean NOT NULL DEFAULT true, "
        "bucket_count integer NOT NULL, "
        "expression boolean NOT NULL DEFAULT false, "
        "generation bigint NOT NULL DEFAULT 0, "
        "phase text NOT NULL DEFAULT 'done', "
        "target integer, "
        "retired_count integer, "
        "retired_expression boolean, "
        "changed_at timestamptz NOT NULL DEFAULT now(), "
        "CONSTRAINT layout_one CHECK (one), "
        "CONSTRAINT layout_phase_check CHECK (phase IN ('done', 'build', 'switch', 'retire')), "
        "CONSTRAINT layout_pkey PRIMARY KEY (one))")
    op.execute(INSERT_COCKROACHDB if _cockroachdb() else INSERT_POSTGRESQL)
    op.execute("ALTER TABLE shardq.workers ADD COLUMN IF NOT EXISTS generation bigint")


# A resharded PostgreSQL schema has no stored bucket column, which every revision before
# this one names: going below it would leave a schema no release can use.
REFUSE_RESHARDED = (
    "DO $$ BEGIN IF EXISTS (SELECT 1 FROM shardq.layout WHERE expression) THEN "
    "RAISE EXCEPTION 'shardq: this schema was resharded (shardq reshard) and has no stored "
    "bucket column, which revisions before 0029 need: it cannot go below 0029; to remove "
    "shardq, DROP SCHEMA shardq CASCADE and DROP TABLE public.shardq_alembic_version'; "
    "END IF; END $$")


def downgrade() -> None:
    if not _cockroachdb():
        op.execute(REFUSE_RESHARDED)
    op.execute("ALTER TABLE shardq.workers DROP COLUMN IF EXISTS generation")
    op.execute("DROP TABLE IF EXISTS shardq.layout")
