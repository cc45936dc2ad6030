"""At most one running task per (queue, key): keyed exclusivity, enforced by the database.

Revision ID: 0007
Revises: 0006

A claim that would lock a second task of a key fails on this index instead of
running it in parallel.  Unkeyed tasks never enter it.
"""

from alembic import context, op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS tasks_running_keys ON shardq.tasks (queue, key) "
        "WHERE key IS NOT NULL AND status = 'locked'"
    )


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_running_keys"))
