"""Index scheduled tasks whose priority head start is still to be applied.

Revision ID: 0004
Revises: 0003

A task enqueued for a future run_at with a priority waits at exec_time = run_at,
out of every claim's range; once due, the janitor moves it run_at - priority
seconds ahead.  Only such tasks enter this partial index.
"""

from alembic import context, op
from psycopg import sql

from shardq.core.migrate import ddl

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bucket = context.config.attributes["bucket_column"]()
    op.execute(ddl(
        "CREATE INDEX IF NOT EXISTS tasks_head_starts ON shardq.tasks ({bucket}, exec_time) "
        "WHERE pending_head_start_s > 0", bucket=sql.SQL(bucket)))


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_head_starts"))
