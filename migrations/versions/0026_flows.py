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

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

STATUSES = ("available", "locked", "dead", "waiting")
KINDS = ("chain", "group", "chord", "graph", "batch")
OUTCOMES = ("succeeded", "dead", "retried", "dropped", "cancelled", "sealed")


def _cockroachdb() -> bool:
    return bool(op.get_context().dialect.name == "cockroachdb")


def _listed(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _status_check(statuses: tuple[str, ...]) -> None:
    # One statement, so the check keeps its name and a re-run does the same again.
    op.execute("ALTER TABLE shardq.tasks DROP CONSTRAINT IF EXISTS tasks_status_check, "
               f"ADD CONSTRAINT tasks_status_check CHECK (status IN ({_listed(statuses)}))")


def upgrade() -> None:
    op.execute("ALTER TABLE shardq.tasks " + ", ".join(
        f"ADD COLUMN IF NOT EXISTS {column}"
        for column in ("flow_id uuid", "flow_next uuid[]", "flow_deps uuid[]", "waits integer")))
    _status_check(STATUSES)
    op.execute("CREATE INDEX IF NOT EXISTS tasks_flows ON shardq.tasks (flow_id, status) "
               "WHERE flow_id IS NOT NULL")
    key = ("PRIMARY KEY (id) USING HASH WITH (bucket_count = "
           f"{int(context.config.attributes['bucket_count'])})" if _cockroachdb()
           else "PRIMARY KEY (id)")
    op.execute(
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
        f"CONSTRAINT flows_kind_check CHECK (kind IN ({_listed(KINDS)})), "
        f"CONSTRAINT flows_pkey {key})")
    sharded = " USING HASH" if _cockroachdb() else ""
    op.execute("CREATE INDEX IF NOT EXISTS flows_finished ON shardq.flows (finished_at)"
               + sharded + " WHERE finished_at IS NOT NULL")
    op.execute(
        "CREATE TABLE IF NOT EXISTS shardq.flow_events ("
        "flow_id uuid NOT NULL, "
        "at timestamptz NOT NULL, "
        "task_id uuid NOT NULL, "
        "outcome text NOT NULL, "
        "next uuid[], "
        "n bigint NOT NULL DEFAULT 1, "
        f"CONSTRAINT flow_events_outcome_check CHECK (outcome IN ({_listed(OUTCOMES)})), "
        "CONSTRAINT flow_events_pkey PRIMARY KEY (flow_id, at, task_id, outcome))")
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
    _status_check(STATUSES[:-1])
    op.execute("ALTER TABLE shardq.tasks " + ", ".join(
        f"DROP COLUMN IF EXISTS {column}"
        for column in ("waits", "flow_deps", "flow_next", "flow_id")))
