"""Index scheduled tasks whose priority head start is still to be applied.

Revision ID: 0004
Revises: 0003

A task enqueued for a future run_at with a priority waits at exec_time = run_at,
out of every claim's range; once due, the janitor moves it run_at - priority
seconds ahead.  Only such tasks enter this partial index.
"""

from alembic import context, op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_context().dialect.name == "cockroachdb":
        buckets = int(context.config.attributes["bucket_count"])
        shard = f"crdb_internal_exec_time_id_queue_status_shard_{buckets}"
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
