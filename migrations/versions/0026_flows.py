"""Task graphs: flows of tasks that wait for one another (chains, groups, chords, graphs
and batches with a completion callback).

Revision ID: 0026
Revises: 0025

- ``shardq.flows``: one row per flow, written when the flow is enqueued.  Its counts
  of nodes that succeeded, died and were cancelled are folded in by the flows'
  resolver (:mod:`shardq.loops.resolver`) in batches, never by the ack of a node.
- ``shardq.flow_events``: what happened to a flow's nodes and is not folded in yet:
  one row per node that succeeded, died, was retried, dropped or cancelled, written
  by the statement that did it.  The resolver deletes the rows it folds in the
  transaction that folds them, so each counts once.  Its key starts with the flow,
  so the resolver reads one flow's events as one range.
- Four columns of ``shardq.tasks``: ``flow_id`` (the flow of a node), ``flow_next``
  (the nodes that wait for it), ``flow_deps`` (the nodes it takes results from, in
  order) and ``waits`` (how many it still waits for).  A node that waits has the
  status ``waiting``: outside the ``available`` range of the primary key, so claims
  never read it.  NULL columns cost a row nothing, so tasks outside flows stay as
  they were.
- ``shardq.results.flow_id``: the results a flow's nodes pass on are kept until the
  flow ends, then expire with it.

Each statement is re-runnable (``IF NOT EXISTS``; the status check is dropped, if
there, and added again in one statement, as revision 0015 replaces the queue-name
check), so a run cut between two of them (CockroachDB runs each in its own
transaction) is simply run again.  On CockroachDB ``flows_finished`` is hash-sharded:
end times grow with the clock, and would otherwise all land in the index's last range.
The downgrade deletes the nodes still waiting, which the old status check forbids:
run again, it finds none.
"""

from alembic import context, op

from shardq.core.migrate import add_columns, check_in, ddl, drop_columns, listed, primary_key

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

STATUSES = ("available", "locked", "dead", "waiting")
KINDS = ("chain", "group", "chord", "graph", "batch")
OUTCOMES = ("succeeded", "dead", "retried", "dropped", "cancelled", "sealed")


def _cockroachdb() -> bool:
    return bool(op.get_context().dialect.name == "cockroachdb")


def upgrade() -> None:
    op.execute(add_columns(
        "tasks", ("flow_id uuid", "flow_next uuid[]", "flow_deps uuid[]", "waits integer")))
    op.execute(check_in("tasks", "tasks_status_check", "status", STATUSES))
    op.execute("CREATE INDEX IF NOT EXISTS tasks_flows ON shardq.tasks (flow_id, status) "
               "WHERE flow_id IS NOT NULL")
    buckets = int(context.config.attributes["bucket_count"]) if _cockroachdb() else None
    op.execute(ddl(
        "CREATE TABLE IF NOT EXISTS shardq.flows ("
        "id uuid NOT NULL, "
        "kind text NOT NULL, "
        "name text, "
        "nodes bigint NOT NULL, "
        "result_id uuid, "
        "keep_result_s double precision NOT NULL, "
        "succeeded bigint NOT NULL DEFAULT 0, "
        "dead bigint NOT NULL DEFAULT 0, "
        "cancelled bigint NOT NULL DEFAULT 0, "
        "created_at timestamptz NOT NULL, "
        "cancelled_at timestamptz, "
        "finished_at timestamptz, "
        "trace_context text, "
        "CONSTRAINT flows_kind_check CHECK (kind IN ({kinds})), "
        "CONSTRAINT flows_pkey {key})", kinds=listed(KINDS), key=primary_key("id", buckets)))
    sharded = " USING HASH" if _cockroachdb() else ""
    op.execute("CREATE INDEX IF NOT EXISTS flows_finished ON shardq.flows (finished_at)"
               + sharded + " WHERE finished_at IS NOT NULL")
    op.execute(ddl(
        "CREATE TABLE IF NOT EXISTS shardq.flow_events ("
        "flow_id uuid NOT NULL, "
        "at timestamptz NOT NULL, "
        "task_id uuid NOT NULL, "
        "outcome text NOT NULL, "
        "next uuid[], "
        "n bigint NOT NULL DEFAULT 1, "
        "CONSTRAINT flow_events_outcome_check CHECK (outcome IN ({outcomes})), "
        "CONSTRAINT flow_events_pkey PRIMARY KEY (flow_id, at, task_id, outcome))",
        outcomes=listed(OUTCOMES)))
    op.execute("ALTER TABLE shardq.results ADD COLUMN IF NOT EXISTS flow_id uuid")
    op.execute("CREATE INDEX IF NOT EXISTS results_flows ON shardq.results (flow_id) "
               "WHERE flow_id IS NOT NULL")


def downgrade() -> None:
    drop_index = context.config.attributes["drop_index"]
    op.execute("DROP INDEX IF EXISTS shardq.results@results_flows" if _cockroachdb()
               else "DROP INDEX IF EXISTS shardq.results_flows")
    op.execute("ALTER TABLE shardq.results DROP COLUMN IF EXISTS flow_id")
    op.execute("DROP TABLE IF EXISTS shardq.flow_events")
    op.execute("DROP TABLE IF EXISTS shardq.flows")
    op.execute(drop_index("tasks_flows"))
    op.execute("DELETE FROM shardq.tasks WHERE status = 'waiting'")
    op.execute(check_in("tasks", "tasks_status_check", "status", STATUSES[:-1]))
    op.execute(drop_columns("tasks", ("waits", "flow_deps", "flow_next", "flow_id")))
