"""Per-attempt history: how each attempt of a task ended, and which worker ran it.

The statements that end an attempt record it in the same statement (``attempts_add``,
spliced into ack, nack, release, defer, cancel and the janitor's rescue), so an attempt
is never ended without its record, nor recorded twice by a statement run again after
its reply was lost.  An ack records one only for a task claimed before: a task that
succeeds at once has no history.  Each task keeps its latest ``attempts_kept_per_task``
attempts, and the janitor deletes those older than ``attempts_retention_s``
(:func:`purge`).
"""

from __future__ import annotations

from uuid import UUID

from shardq.core import validate
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import Attempt


def attempts(st: Statements, task_id: UUID | str) -> Plan[list[Attempt]]:
    """The attempts of one task, oldest first, the running one last; they outlive the
    task (for ``attempts_retention_s``), so a finished task's are read too."""
    tid = validate.task_id(task_id)

    def steps() -> Steps[list[Attempt]]:
        return read((yield st.fetch("attempts_list", {"id": tid})))

    return plan(steps)


def read(rows: list[tuple[object, ...]]) -> list[Attempt]:
    """Attempts from the rows of ``attempts_list``."""
    return [Attempt(*row) for row in rows]  # type: ignore[arg-type]


def purge(st: Statements) -> Plan[int]:
    """Delete attempts that ended more than ``attempts_retention_s`` ago, in bounded
    batches (the janitor runs it); its value is how many."""
    limit = st.config.janitor_batch
    query = st.query("janitor_attempts", limit)

    def steps() -> Steps[int]:
        purged = 0
        while True:
            rows = yield st.fetch(query, {"attempts_retention_s": st.config.attempts_retention_s})
            purged += len(rows)
            if len(rows) < limit:
                return purged

    return plan(steps)
