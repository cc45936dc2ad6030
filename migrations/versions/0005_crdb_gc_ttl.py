"""Shorten MVCC garbage retention of the tasks table on CockroachDB.

Revision ID: 0005
Revises: 0004

Every task is written about three times and deleted within seconds; CockroachDB
keeps old versions until gc.ttlseconds has passed, and claims must step over
them.  Ten minutes keeps that garbage small.  PostgreSQL needs nothing here: its
autovacuum settings are part of revision 0002.
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_context().dialect.name == "cockroachdb":
        op.execute("ALTER TABLE shardq.tasks CONFIGURE ZONE USING gc.ttlseconds = 600")


def downgrade() -> None:
    if op.get_context().dialect.name == "cockroachdb":
        op.execute("ALTER TABLE shardq.tasks CONFIGURE ZONE DISCARD")
