"""The trace context a task was enqueued under, for tracing from enqueue to handler.

Revision ID: 0025
Revises: 0024

``trace_context`` holds the W3C ``traceparent`` of the span that enqueued the task
(``00-<trace id>-<span id>-<flags>``), written by an enqueue that runs under
``shardq.contrib.opentelemetry``'s instrumentor, and NULL otherwise.  A worker's claim
reads it back, and the handler's span joins that trace.  A NULL costs a row nothing
(PostgreSQL's null bitmap; CockroachDB stores no value), so untraced tasks stay as
they were.  Adding a nullable column without a default rewrites no rows on either
engine.
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE shardq.tasks ADD COLUMN IF NOT EXISTS trace_context text")


def downgrade() -> None:
    op.execute("ALTER TABLE shardq.tasks DROP COLUMN IF EXISTS trace_context")
