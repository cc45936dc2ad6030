"""Task results: what a task's handler returned, kept for a while after it succeeded.

Revision ID: 0016
Revises: 0015

A task whose handler asks for it (``@app.task(keep_result_s=...)``) leaves a row here
when it succeeds, written by the statement that acks it (``sql/ack_results.sql``), so
a task is never done without its result.  ``value`` is the JSON the handler returned;
``error`` says why there is none when the return value could not be kept (it was not
JSON, or too large).  ``expires_at`` is when the janitor may delete the row
(revision 0017 indexes it).  ``client.result(task_id)`` reads a row by id.

On CockroachDB the key is hash-sharded, as the tasks table's is, so that the rows of
many workers' acks spread over ranges instead of queueing for one.
"""

from alembic import context, op

from shardq.core.migrate import ddl, primary_key

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLE = """CREATE TABLE IF NOT EXISTS shardq.results (
    id uuid NOT NULL,
    queue text NOT NULL,
    value jsonb,
    error text,
    attempts integer NOT NULL,
    enqueued_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT results_pkey {key}
)"""


def upgrade() -> None:
    hashed = op.get_context().dialect.name == "cockroachdb"
    buckets = int(context.config.attributes["bucket_count"]) if hashed else None
    op.execute(ddl(TABLE, key=primary_key("id", buckets)))


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.results")
