"""Throughput counts: tasks enqueued and completed per queue, per second.

Revision ID: 0013
Revises: 0012

The statements that enqueue and ack tasks add their counts here in the same
statement (or transaction), so ``stats()`` reads recent rates from at most a
thousand rows instead of counting tasks.  Each statement adds to one of 16 rows of
its second, picked at random, so that concurrent writers rarely wait for one another's
row lock; the janitor deletes periods older than a few minutes.
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.throughput ("
        "queue text NOT NULL, "
        "period timestamptz NOT NULL, "
        "slot smallint NOT NULL, "
        "enqueued bigint NOT NULL DEFAULT 0, "
        "completed bigint NOT NULL DEFAULT 0, "
        "PRIMARY KEY (queue, period, slot))"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.throughput")
