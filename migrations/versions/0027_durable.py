"""Durable tasks: named steps checkpointed once, and tasks parked on a sleep, an event or
their children, holding no worker meanwhile.

Revision ID: 0027
Revises: 0026

- ``shardq.steps``: one row per durable call of a task, keyed by (task, name): a
  step's value, a wait's deadline while it waits and what it came to once done.  A
  task's rows are deleted by the statement that writes its success, and with the task
  wherever it is deleted.
- ``shardq.events``: one row per event (``Client.emit_event``), keyed by its name: the
  first emit's payload.  A task that parks on an event not emitted yet writes the row
  without a payload: the row's lock orders the park and an emit, so a wake-up is never
  missed.  ``events_expiry`` serves the janitor's retention.
- Three columns of ``shardq.tasks``: ``parked`` (why a task waits: ``sleep``,
  ``event`` or ``children``; a parked task is ``available`` with ``exec_time`` its
  wake-up time, beyond every claim's range until then), ``wait_event`` (the event it
  waits for) and ``durable`` (it has checkpoints).  ``tasks_parked`` finds the tasks an
  emit wakes, and counts parked tasks.  NULL columns cost a row nothing.
- ``shardq.flows``: the kind ``spawn`` (a durable task's children, keyed by the task's
  id) and ``folded``, the events folded in so far, which a parent reads before it
  parks on its children.
- ``shardq.attempts``: the outcome ``parked``.

Each statement is re-runnable (``IF NOT EXISTS``; checks dropped and added again in one
statement), so a run cut between two of them (CockroachDB runs each in its own
transaction) is simply run again.
"""

from alembic import context, op

from shardq.core.migrate import add_columns, check_in, ddl, drop_columns, listed, primary_key

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

KINDS = ("chain", "group", "chord", "graph", "batch", "spawn")
OUTCOMES = ("acked", "failed", "lease_expired", "released", "deferred", "cancelled", "dead",
            "parked")
PARKED = ("sleep", "event", "children")
STEP_KINDS = ("step", "sleep", "event", "spawn", "wait")
STEP_STATES = ("done", "waiting", "timed_out")


def _cockroachdb() -> bool:
    return bool(op.get_context().dialect.name == "cockroachdb")


def upgrade() -> None:
    op.execute(add_columns("tasks", ("parked text", "wait_event text", "durable boolean")))
    op.execute(check_in("tasks", "tasks_parked_check", "parked", PARKED))
    op.execute("CREATE INDEX IF NOT EXISTS tasks_parked ON shardq.tasks (parked, wait_event) "
               "WHERE parked IS NOT NULL")
    op.execute(ddl(
        "CREATE TABLE IF NOT EXISTS shardq.steps ("
        "task_id uuid NOT NULL, "
        "name text NOT NULL, "
        "kind text NOT NULL, "
        "state text NOT NULL, "
        "value jsonb, "
        "until timestamptz, "
        "at timestamptz NOT NULL, "
        "CONSTRAINT steps_kind_check CHECK (kind IN ({kinds})), "
        "CONSTRAINT steps_state_check CHECK (state IN ({states})), "
        "CONSTRAINT steps_pkey PRIMARY KEY (task_id, name))",
        kinds=listed(STEP_KINDS), states=listed(STEP_STATES)))
    buckets = int(context.config.attributes["bucket_count"]) if _cockroachdb() else None
    op.execute(ddl(
        "CREATE TABLE IF NOT EXISTS shardq.events ("
        "name text NOT NULL, "
        "payload jsonb, "
        "emitted_at timestamptz, "
        "expires_at timestamptz NOT NULL, "
        "CONSTRAINT events_pkey {key})", key=primary_key("name", buckets)))
    sharded = " USING HASH" if _cockroachdb() else ""
    op.execute("CREATE INDEX IF NOT EXISTS events_expiry ON shardq.events (expires_at)"
               + sharded)
    op.execute("ALTER TABLE shardq.flows ADD COLUMN IF NOT EXISTS folded bigint NOT NULL "
               "DEFAULT 0")
    op.execute(check_in("flows", "flows_kind_check", "kind", KINDS))
    op.execute(check_in("attempts", "attempts_outcome", "outcome", OUTCOMES))


def downgrade() -> None:
    drop_index = context.config.attributes["drop_index"]
    op.execute("DELETE FROM shardq.attempts WHERE outcome = 'parked'")
    op.execute(check_in("attempts", "attempts_outcome", "outcome", OUTCOMES[:-1]))
    op.execute("DELETE FROM shardq.flows WHERE kind = 'spawn'")
    op.execute(check_in("flows", "flows_kind_check", "kind", KINDS[:-1]))
    op.execute("ALTER TABLE shardq.flows DROP COLUMN IF EXISTS folded")
    op.execute("DROP TABLE IF EXISTS shardq.events")
    op.execute("DROP TABLE IF EXISTS shardq.steps")
    op.execute(drop_index("tasks_parked"))
    # The columns' checks go with them.
    op.execute(drop_columns("tasks", ("durable", "wait_event", "parked")))
