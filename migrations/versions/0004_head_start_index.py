"""Index scheduled tasks whose priority head start is still to be applied.

Revision ID: 0004
Revises: 0003

A task enqueued for a future run_at with a priority waits at exec_time = run_at,
out of every claim's range; once due, the janitor moves it run_at - priority
seconds ahead.  Only such tasks enter this partial index.
"""

import sqlalchemy as sa
from alembic import context, op

revision = "0004"
down_revision = "0003"
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
        shard = _shard_column()
        op.execute(
            f"CREATE INDEX IF NOT EXISTS tasks_head_starts ON shardq.tasks ({shard}, exec_time) "
            "WHERE pending_head_start_s > 0"
        )
    else:
        op.execute(
            "CREATE INDEX IF NOT EXISTS tasks_head_starts ON shardq.tasks (bucket, exec_time) "
            "WHERE pending_head_start_s > 0"
        )


def downgrade() -> None:
    if op.get_context().dialect.name == "cockroachdb":
        op.execute("DROP INDEX IF EXISTS shardq.tasks@tasks_head_starts")
    else:
        op.execute("DROP INDEX IF EXISTS shardq.tasks_head_starts")
