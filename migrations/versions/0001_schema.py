"""Create the shardq schema.

Revision ID: 0001
Revises:
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE SCHEMA IF NOT EXISTS shardq")


def downgrade() -> None:
    op.execute("DROP SCHEMA IF EXISTS shardq")
