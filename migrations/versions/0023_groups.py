"""Flow control: shardq.groups, one row per (queue, group) whose rate per group was
spent, holding that group's rate state.

Revision ID: 0023
Revises: 0022

See revision 0018.
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE TABLE IF NOT EXISTS shardq.groups (queue text NOT NULL, "
               "name text NOT NULL, rate_tat timestamptz, "
               "CONSTRAINT groups_pkey PRIMARY KEY (queue, name))")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.groups")
