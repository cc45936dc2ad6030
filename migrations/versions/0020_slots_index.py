"""Flow control: the unique index that keeps max_running (one slot per running task).

Revision ID: 0020
Revises: 0019

See revision 0018.
"""

from alembic import context, op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE UNIQUE INDEX IF NOT EXISTS tasks_slots ON shardq.tasks (queue, slot) "
               "WHERE status = 'locked' AND slot IS NOT NULL")


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_slots"))
