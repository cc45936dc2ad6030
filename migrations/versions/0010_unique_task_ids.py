"""Task ids are unique on their own.

Revision ID: 0010
Revises: 0009

The primary key holds the id beside the bucket, queue, status and exec_time, so it
did not stop one id from being written twice, and a retry of an enqueue whose reply
was lost after the server committed did exactly that.  With ids unique, an enqueue
retried after a lost reply recognises the rows it already wrote, and claimed tasks
are found by (id, lease token) however far their lease has moved.

The index is built under a brief write lock.  On a large table, build it first
without one: ``CREATE UNIQUE INDEX CONCURRENTLY tasks_ids ON shardq.tasks (id)``;
this revision then finds it in place.
"""

from alembic import context, op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE UNIQUE INDEX IF NOT EXISTS tasks_ids ON shardq.tasks (id)")


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_ids"))
