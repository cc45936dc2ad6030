"""The dashboard as an operations console: an audit trail, server-side sessions, and a
pause that ends by itself.

Revision ID: 0028
Revises: 0027

- ``shardq.audit``: one row per action taken through the dashboard's pages, its JSON
  API or the CLI (who, with which role, what, on which queue or task, its parameters
  and outcome, when and from which address), written in the action's own transaction;
  and one per refused action or failed login.  ``audit_at`` serves the newest-first
  reads and the janitor's retention.
- ``shardq.sessions``: the dashboard's login sessions, keyed by a hash of the cookie's
  random id (a reader of the table cannot use a row to log in), with the CSRF token of
  the session's forms, its idle limit and absolute expiry.  ``sessions_actor`` ends a
  removed credential's sessions; ``sessions_expiry`` serves the janitor.
- ``shardq.queues.paused_until``: a pause with an end; claims hand the queue's tasks out
  again once it has passed.

Each statement is re-runnable (``IF NOT EXISTS``; checks dropped and added again in one
statement), so a run cut between two of them (CockroachDB runs each in its own
transaction) is simply run again.
"""

from alembic import context, op

from shardq.core.migrate import ddl, listed, primary_key

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

VIA = ("page", "api", "cli")
OUTCOMES = ("ok", "refused", "failed")


def _cockroachdb() -> bool:
    return bool(op.get_context().dialect.name == "cockroachdb")


def upgrade() -> None:
    sharded = " USING HASH" if _cockroachdb() else ""
    buckets = int(context.config.attributes["bucket_count"]) if _cockroachdb() else None
    op.execute(ddl(
        "CREATE TABLE IF NOT EXISTS shardq.audit ("
        "id uuid NOT NULL DEFAULT gen_random_uuid(), "
        "at timestamptz NOT NULL, "
        "actor text NOT NULL, "
        "role text NOT NULL, "
        "via text NOT NULL, "
        "action text NOT NULL, "
        "queue text, "
        "task_id uuid, "
        "params jsonb, "
        "outcome text NOT NULL, "
        "detail text, "
        "address text, "
        "CONSTRAINT audit_via_check CHECK (via IN ({via})), "
        "CONSTRAINT audit_outcome_check CHECK (outcome IN ({outcomes})), "
        "CONSTRAINT audit_pkey {key})",
        via=listed(VIA), outcomes=listed(OUTCOMES), key=primary_key("id", buckets)))
    op.execute("CREATE INDEX IF NOT EXISTS audit_at ON shardq.audit (at)" + sharded)
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.sessions ("
        "id text NOT NULL, "
        "actor text NOT NULL, "
        "role text NOT NULL, "
        "credential text NOT NULL, "
        "csrf text NOT NULL, "
        "address text, "
        "created_at timestamptz NOT NULL, "
        "seen_at timestamptz NOT NULL, "
        "idle_s integer NOT NULL, "
        "expires_at timestamptz NOT NULL, "
        "CONSTRAINT sessions_pkey PRIMARY KEY (id))")
    op.execute("CREATE INDEX IF NOT EXISTS sessions_actor ON shardq.sessions (actor)")
    op.execute("CREATE INDEX IF NOT EXISTS sessions_expiry ON shardq.sessions (expires_at)"
               + sharded)
    op.execute("ALTER TABLE shardq.queues ADD COLUMN IF NOT EXISTS paused_until timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE shardq.queues DROP COLUMN IF EXISTS paused_until")
    op.execute("DROP TABLE IF EXISTS shardq.sessions")
    op.execute("DROP TABLE IF EXISTS shardq.audit")
