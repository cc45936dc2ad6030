"""Periodic schedules: one row per schedule, with the last slot it fired.

Revision ID: 0011
Revises: 0010

A worker registers its app's schedules here when it starts and fires a due slot with
one statement that moves ``last_slot`` forward only if it still holds the value the
worker read, and enqueues the task in the same statement (``sql/periodic_fire.sql``):
each slot is enqueued at most once however many workers run.  ``since`` is when the
current expression took effect (slots before it never fire); ``removed_at`` marks a
schedule its app no longer defines.  The task settings are kept in the row so that
``shardq periodic run NAME`` works without the app.
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.periodic ("
        "name text NOT NULL PRIMARY KEY, "
        "cron text, "
        "every_s double precision, "
        "tz text NOT NULL, "
        "missed text NOT NULL, "
        "task text NOT NULL, "
        "queue text NOT NULL, "
        "priority integer NOT NULL, "
        "max_attempts integer NOT NULL, "
        "since timestamptz NOT NULL, "
        "last_slot timestamptz, "
        "removed_at timestamptz, "
        "CONSTRAINT periodic_expression_check CHECK ((cron IS NULL) <> (every_s IS NULL)), "
        "CONSTRAINT periodic_missed_check CHECK (missed IN ('skip', 'once', 'all')))"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.periodic")
