"""Autovacuum settings of the tasks table for a queue's steady churn (PostgreSQL).

Revision ID: 0014
Revises: 0013

Every task leaves about three dead row versions (the claim's update, perhaps a
nack's, the ack's delete), so dead rows pile up in proportion to throughput, not
to the table's size.  Revision 0002 already made autovacuum trigger on a fixed
count (scale factors 0) and run without cost-based sleeping; this one:

- lowers the triggers to 1,000 dead rows and 1,000 inserted rows: at a few hundred
  tasks a second autovacuum is then due at every ``autovacuum_naptime`` (default one
  minute, a server-wide setting no table can shorten; the janitor's vacuum step,
  ``shardq.loops.vacuum``, covers the time in between);
- keeps ``autovacuum_vacuum_cost_delay = 0`` and the scale factors at 0 (restated,
  so this revision alone says what the table runs with);
- sets ``vacuum_truncate = false``: a vacuum that finds empty pages at the end of
  the table would take an ACCESS EXCLUSIVE lock to cut them off, stalling every
  claim behind it, for pages the next second's inserts want back.

CockroachDB has no such storage parameters (``Dialect.vacuum`` is false there): its
MVCC garbage goes after ``gc.ttlseconds`` (revision 0005).  The downgrade restores
revision 0002's values.
"""

from alembic import op

from shardq.core.dialect import named

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

SETTINGS = (
    "ALTER TABLE shardq.tasks SET ("
    "autovacuum_vacuum_scale_factor = 0, "
    "autovacuum_vacuum_threshold = 1000, "
    "autovacuum_vacuum_insert_scale_factor = 0, "
    "autovacuum_vacuum_insert_threshold = 1000, "
    "autovacuum_vacuum_cost_delay = 0, "
    "vacuum_truncate = false)"
)
# Revision 0002's values of the settings this revision changes.
BEFORE = ("ALTER TABLE shardq.tasks SET (autovacuum_vacuum_threshold = 5000, "
          "autovacuum_vacuum_insert_threshold = 20000), RESET (vacuum_truncate)")


def _vacuumed() -> bool:
    return named(op.get_context().dialect.name).vacuum


def upgrade() -> None:
    if _vacuumed():
        op.execute(SETTINGS)


def downgrade() -> None:
    if _vacuumed():
        op.execute(BEFORE)
