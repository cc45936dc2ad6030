"""Queue control: one row per queue that an operator paused (or once paused).

Revision ID: 0012
Revises: 0011

A paused queue keeps accepting tasks and hands out none: every claim checks this
table for its queue (``sql/claim_where.sql``), once per statement, so running workers
stop taking the queue's tasks at their next claim and start again at the first
claim after the queue is resumed.  Queues nobody paused have no row.
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.queues ("
        "name text NOT NULL PRIMARY KEY, "
        "paused_at timestamptz)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.queues")
