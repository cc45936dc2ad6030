"""Index the leases of claimed tasks, for the janitor.

Revision ID: 0003
Revises: 0002

While a task is claimed its exec_time is its lease expiry, so this partial index
holds exactly the in-flight tasks of each bucket ordered by expiry: the janitor
reads the expired ones as one bounded range per bucket.  The id makes it unique,
so a lookup of one claimed task through it (which the planner may prefer to the
primary key) reads one entry, not every task leased in the same instant.
"""

import sqlalchemy as sa
from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _shard_column() -> str:
    """The hidden shard column of the primary key (key columns sorted by name), read from
    the table when there is one: its bucket count may differ from this run's setting."""
    buckets = int(context.config.attributes["bucket_count"])
    configured = f"crdb_internal_exec_time_id_queue_status_shard_{buckets}"
    if context.is_offline_mode():
        return configured
    found = op.get_bind().execute(sa.text(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'shardq' "
        "AND table_name = 'tasks' AND column_name LIKE :p"),
        {"p": "crdb_internal_%_shard_%"}).scalars().all()
    return str(found[0]) if len(found) == 1 else configured


def upgrade() -> None:
    if op.get_context().dialect.name == "cockroachdb":
        # The hidden shard column of the primary key: key columns sorted by name.
        shard = _shard_column()
        op.execute(
            f"CREATE INDEX IF NOT EXISTS tasks_leases ON shardq.tasks ({shard}, exec_time, id) "
            "WHERE status = 'locked'"
        )
    else:
        op.execute(
            "CREATE INDEX IF NOT EXISTS tasks_leases ON shardq.tasks (bucket, exec_time, id) "
            "WHERE status = 'locked'"
        )


def downgrade() -> None:
    if op.get_context().dialect.name == "cockroachdb":
        op.execute("DROP INDEX IF EXISTS shardq.tasks@tasks_leases")
    else:
        op.execute("DROP INDEX IF EXISTS shardq.tasks_leases")
