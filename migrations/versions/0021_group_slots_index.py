"""Flow control: the unique index that keeps max_running_per_group.

Revision ID: 0021
Revises: 0020

See revision 0018.
"""

from alembic import context, op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE UNIQUE INDEX IF NOT EXISTS tasks_group_slots ON shardq.tasks "
               "(queue, task_group, group_slot) "
               "WHERE status = 'locked' AND group_slot IS NOT NULL")


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_group_slots"))
