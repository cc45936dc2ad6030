"""Flow control: the waiting grouped tasks by queue, group and due time, which fair claims walk.

Revision ID: 0022
Revises: 0021

See revision 0018.
"""

from alembic import context, op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS tasks_groups_waiting ON shardq.tasks "
               "(queue, task_group, exec_time) "
               "WHERE status = 'available' AND task_group IS NOT NULL")


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_groups_waiting"))
