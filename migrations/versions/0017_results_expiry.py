"""Index the results by when they expire, for the janitor.

Revision ID: 0017
Revises: 0016

The janitor deletes expired results in bounded batches, oldest first, reading only
the expired entries of this index.  On CockroachDB the index is hash-sharded:
expiry times grow with the clock, and every ack that keeps a result would otherwise
write to the one range at the index's end.
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def _cockroachdb() -> bool:
    return bool(op.get_context().dialect.name == "cockroachdb")


def upgrade() -> None:
    sharded = " USING HASH" if _cockroachdb() else ""
    op.execute("CREATE INDEX IF NOT EXISTS results_expiry ON shardq.results (expires_at)"
               + sharded)


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS shardq.results@results_expiry" if _cockroachdb()
               else "DROP INDEX IF EXISTS shardq.results_expiry")
