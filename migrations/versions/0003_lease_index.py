"""Index the leases of claimed tasks, for the janitor.

Revision ID: 0003
Revises: 0002

While a task is claimed its exec_time is its lease expiry, so this partial index
holds exactly the in-flight tasks of each bucket ordered by expiry: the janitor
reads the expired ones as one bounded range per bucket.  The id makes it unique,
so a lookup of one claimed task through it (which the planner may prefer to the
primary key) reads one entry, not every task leased in the same instant.
"""

from alembic import context, op
from psycopg import sql

from shardq.core.migrate import ddl

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bucket = context.config.attributes["bucket_column"]()
    op.execute(ddl(
        "CREATE INDEX IF NOT EXISTS tasks_leases ON shardq.tasks ({bucket}, exec_time, id) "
        "WHERE status = 'locked'", bucket=sql.SQL(bucket)))


def downgrade() -> None:
    op.execute(context.config.attributes["drop_index"]("tasks_leases"))
