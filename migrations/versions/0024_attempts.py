"""Per-attempt history: the workers that run tasks, and how each attempt ended.

Revision ID: 0024
Revises: 0023

- ``shardq.workers``: one row per running ``shardq consume`` process, written when it
  starts, refreshed by its heartbeat, deleted when it stops cleanly; the janitor
  deletes the rows of workers not seen for ``worker_stale_s``.
- ``shardq.tasks.worker_id``: the worker whose claim holds the task (set by the claim;
  NULL for a claim made outside a worker that gave no identity).  A uuid: 16 bytes on
  every claimed row, where a name would be variable width.
- ``shardq.attempts``: one row per attempt that ended, written by the statement that
  ended it (ack, nack, release, defer, cancel, the janitor's lease-expiry rescue),
  with the worker's name, host and pid copied from ``shardq.workers``, so the history
  outlives the worker's row.  An ack writes a row only for a task claimed before, so a
  task that succeeds at once costs nothing here.  ``slot`` is the attempt number
  modulo ``attempts_kept_per_task``: a task keeps its latest attempts, each write
  replacing the oldest.  The janitor deletes rows older than ``attempts_retention_s``
  (the index ``attempts_ended``; hash-sharded on CockroachDB, where the times of
  many writers would otherwise all land in the range at the index's end).

Each statement is re-runnable (``IF NOT EXISTS``), so a run cut between two of them
(CockroachDB runs each in its own transaction) is simply run again.
"""

from alembic import op

from shardq.core.migrate import ddl, listed

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

OUTCOMES = ("acked", "failed", "lease_expired", "released", "deferred", "cancelled", "dead")


def _cockroachdb() -> bool:
    return bool(op.get_context().dialect.name == "cockroachdb")


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.workers ("
        "id uuid NOT NULL, "
        "name text NOT NULL, "
        "host text NOT NULL, "
        "pid integer NOT NULL, "
        "queues text[] NOT NULL, "
        "started_at timestamptz NOT NULL, "
        "last_seen_at timestamptz NOT NULL, "
        "CONSTRAINT workers_pkey PRIMARY KEY (id))")
    op.execute("ALTER TABLE shardq.tasks ADD COLUMN IF NOT EXISTS worker_id uuid")
    op.execute(ddl(
        "CREATE TABLE IF NOT EXISTS shardq.attempts ("
        "task_id uuid NOT NULL, "
        "slot integer NOT NULL, "
        "attempt integer NOT NULL, "
        "queue text NOT NULL, "
        "claimed_at timestamptz, "
        "ended_at timestamptz NOT NULL, "
        "outcome text NOT NULL, "
        "error text, "
        "worker_id uuid, "
        "worker_name text, "
        "worker_host text, "
        "worker_pid integer, "
        "CONSTRAINT attempts_outcome CHECK (outcome IN ({outcomes})), "
        "CONSTRAINT attempts_pkey PRIMARY KEY (task_id, slot))", outcomes=listed(OUTCOMES)))
    sharded = " USING HASH" if _cockroachdb() else ""
    op.execute("CREATE INDEX IF NOT EXISTS attempts_ended ON shardq.attempts (ended_at)"
               + sharded)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS shardq.attempts")
    op.execute("ALTER TABLE shardq.tasks DROP COLUMN IF EXISTS worker_id")
    op.execute("DROP TABLE IF EXISTS shardq.workers")
