"""Flow control: task groups, per-queue limits and the capacity slots that enforce them.

Revision ID: 0018
Revises: 0017

The revisions up to 0023 make the parts (one statement each: CockroachDB changes a
schema one statement per transaction); this one adds the tasks' columns.

- ``tasks.task_group``: the group a task belongs to (a tenant, a customer), the unit
  of fairness and of per-group limits.  NULL for tasks enqueued without one.
- ``tasks.slot`` and ``tasks.group_slot``: the capacity a running task holds under its
  queue's ``max_running`` and ``max_running_per_group``.  A claim under a limit gives
  each task a free slot number between 1 and the limit, and the unique partial indexes
  ``tasks_slots`` and ``tasks_group_slots`` make two running tasks holding one slot
  impossible: the database itself keeps the limit, whatever a claimer believed.  A
  slot is free again as soon as its task stops being 'locked' (acked, failed, released,
  cancelled, or put back by the janitor when its lease expired): nothing has to hand
  it back, so a killed worker cannot leak capacity.  Claims of queues without limits
  set both to NULL, so those tasks never enter the indexes.
- ``tasks_groups_waiting``: the waiting grouped tasks of a queue by group and due
  time, which a fair claim walks group by group (ungrouped tasks are not in it).
- ``shardq.queues`` gains the limits (``max_running``, ``max_running_per_group``,
  ``rate``/``rate_per_group`` as a count per period with a burst) and the rate's
  state (``rate_tat``: the generic cell rate algorithm's theoretical arrival time).
- ``shardq.groups``: one row per (queue, group) that a per-group rate has spent
  tokens of, holding that group's rate state.
"""

from alembic import op

from shardq.core.migrate import add_columns, drop_columns

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

COLUMNS = (
    "task_group text CHECK (task_group IS NULL OR length(task_group) BETWEEN 1 AND 256)",
    "slot integer",
    "group_slot integer",
)


def upgrade() -> None:
    op.execute(add_columns("tasks", COLUMNS))


def downgrade() -> None:
    op.execute(drop_columns("tasks", [c.split()[0] for c in reversed(COLUMNS)]))
