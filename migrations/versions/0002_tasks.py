"""Create the hash-sharded tasks table.

Revision ID: 0002
Revises: 0001

The primary key is (bucket, queue, status, exec_time, id): one bucket's eligible
tasks of one queue are a single index range ordered by exec_time, and claimed
(status 'locked') or dead rows sit in other ranges, so a claim never reads them.

PostgreSQL: ``bucket`` is a stored generated column, a function of the id only:
the last two bytes of the uuid, big-endian, modulo the bucket count
(``shardq.core.dialect.bucket_sql``, which the runtime's ``bucket_of`` mirrors).  Any engine
(Spark, psql, COPY) gets the same bucket for the same id, and writers never send it.

CockroachDB: the primary key is ``USING HASH`` and CockroachDB keeps the hidden
shard column ``crdb_internal_<key columns, sorted>_shard_<N>`` itself.
"""

from alembic import context, op
from psycopg import sql

from shardq.core.dialect import bucket_sql
from shardq.core.migrate import ddl

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The same default as shardq.core.config.DEFAULT_MAX_ATTEMPTS, written out so this
# revision stays what it was when it shipped.
MAX_ATTEMPTS_DEFAULT = 10

COLUMNS = sql.SQL("""
    queue text NOT NULL,
    status text NOT NULL DEFAULT 'available',
    exec_time timestamptz NOT NULL DEFAULT now(),
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    payload jsonb NOT NULL,
    key text,
    priority integer NOT NULL DEFAULT 0,
    pending_head_start_s integer NOT NULL DEFAULT 0,
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT {max_attempts},
    lease_token uuid,
    last_error text,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    first_claimed_at timestamptz,
    last_claimed_at timestamptz,
    times_claimed integer NOT NULL DEFAULT 0,
    times_requeued integer NOT NULL DEFAULT 0,
    last_requeued_at timestamptz,
    CONSTRAINT tasks_status_check CHECK (status IN ('available', 'locked', 'dead')),
    CONSTRAINT tasks_key_check CHECK (key IS NULL OR length(key) BETWEEN 1 AND 512),
    CONSTRAINT tasks_queue_check CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{{0,127}}$'),
    CONSTRAINT tasks_attempts_check CHECK (attempts >= 0 AND max_attempts >= 1),
    CONSTRAINT tasks_head_start_check CHECK (pending_head_start_s >= 0)""").format(
    max_attempts=sql.Literal(MAX_ATTEMPTS_DEFAULT))


def _postgresql(buckets: int) -> str:
    # Storage settings for a table whose rows are inserted, rewritten about twice
    # and deleted within seconds:
    # - fillfactor 90 leaves room on each page for the row version a claim or a
    #   nack writes, so it usually lands on the same page;
    # - autovacuum triggers on a fixed number of dead rows (scale factor 0), since
    #   a queue's dead tuples pile up in proportion to throughput, not table size,
    #   and runs without cost-based sleeping so it keeps up with that churn.
    return ddl("""
CREATE TABLE IF NOT EXISTS shardq.tasks (
    bucket smallint GENERATED ALWAYS AS ({bucket}) STORED,{columns},
    CONSTRAINT tasks_pkey PRIMARY KEY (bucket, queue, status, exec_time, id)
) WITH (
    fillfactor = 90,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
)""", bucket=sql.SQL(bucket_sql("id", buckets)), columns=COLUMNS)


def _cockroachdb(buckets: int) -> str:
    return ddl("""
CREATE TABLE IF NOT EXISTS shardq.tasks ({columns},
    CONSTRAINT tasks_pkey PRIMARY KEY (queue, status, exec_time, id)
        USING HASH WITH (bucket_count = {buckets})
)""", columns=COLUMNS, buckets=sql.Literal(buckets))


def upgrade() -> None:
    buckets = int(context.config.attributes["bucket_count"])
    if op.get_context().dialect.name == "cockroachdb":
        op.execute(_cockroachdb(buckets))
    else:
        op.execute(_postgresql(buckets))


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.tasks")
