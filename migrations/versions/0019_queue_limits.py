"""Flow control: each queue's limits and its rate's state, in shardq.queues.

Revision ID: 0019
Revises: 0018

``max_running`` and ``max_running_per_group`` cap running tasks; ``rate_*`` and
``rate_per_group_*`` cap claims per period (a count, a period and a burst); ``rate_tat``
is the queue's rate state (the generic cell rate algorithm's theoretical arrival
time).  NULL: no such limit.  See revision 0018 and ``shardq.ops.flow``.
"""

from alembic import op

from shardq.core.migrate import add_columns, drop_columns

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

COLUMNS = (
    "max_running integer CHECK (max_running >= 1)",
    "max_running_per_group integer CHECK (max_running_per_group >= 1)",
    "rate_count integer CHECK (rate_count >= 1)",
    "rate_period_s float8 CHECK (rate_period_s > 0)",
    "rate_burst integer CHECK (rate_burst >= 1)",
    "rate_tat timestamptz",
    "rate_per_group_count integer CHECK (rate_per_group_count >= 1)",
    "rate_per_group_period_s float8 CHECK (rate_per_group_period_s > 0)",
    "rate_per_group_burst integer CHECK (rate_per_group_burst >= 1)",
)


def upgrade() -> None:
    op.execute(add_columns("queues", COLUMNS))


def downgrade() -> None:
    op.execute(drop_columns("queues", [c.split()[0] for c in reversed(COLUMNS)]))
