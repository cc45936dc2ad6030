"""The ledger of task ids that idempotent Spark writes have merged.

Revision ID: 0008
Revises: 0007

``shardq.spark.write_tasks(..., mode="idempotent")`` gives each row a deterministic id
and merges only the ids this table has not seen, recording them in the same
transaction: a re-run of the same job, or a Spark task retried after it wrote,
inserts nothing twice, even after the first run's tasks were done and deleted.
``shardq.spark.prune_ledger`` forgets old ids.
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.spark_ledger ("
        "id uuid NOT NULL PRIMARY KEY, merged_at timestamptz NOT NULL DEFAULT now())"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.spark_ledger")
