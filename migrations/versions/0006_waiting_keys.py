"""At most one waiting task per (queue, key).

Revision ID: 0006
Revises: 0005

Enqueuing a key that already has a waiting (available) task updates that task
instead of adding one: this index is the ON CONFLICT arbiter.  A key may have one
waiting task beside its running one: the follow-up, which claims pass over until
the running task is gone.  Unkeyed tasks never enter this index.
"""

from alembic import context, op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS tasks_waiting_keys ON shardq.tasks (queue, key) "
        "WHERE key IS NOT NULL AND status = 'available'"
    )


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_waiting_keys"))
