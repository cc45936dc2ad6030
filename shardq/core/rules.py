"""The rules of shardq.tasks' columns, as one sentence each, and which rule a row the
database refused broke: known to the checks of what callers hand in
(:mod:`shardq.core.validate`) and to the mapping of database errors
(:mod:`shardq.core.errors`) alike, so this module imports neither."""

from __future__ import annotations

QUEUE_RULE = "1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
MAX_KEY_CHARS = 512
INT4_MAX = 2**31 - 1  # priority, attempts and max_attempts are integer columns
MAX_PRIORITY_S = INT4_MAX  # about 68 years
MAX_BUCKET_COUNT = 1024  # a schema's buckets, at creation and after a reshard

NOT_NULL = "must not be null"
# What each CHECK constraint of shardq.tasks that a new task can break asks of it:
# (the argument, the rule).  Rows that reach the table without these checks (Spark's
# JDBC writer) learn the rule from here when the database refuses them.
CHECKS = {
    "tasks_key_check": ("key", f"must be 1 to {MAX_KEY_CHARS} characters"),
    "tasks_queue_check": ("queue", f"must be {QUEUE_RULE}"),
    "tasks_attempts_check": ("max_attempts", f"must be between 1 and {INT4_MAX}"),
}
PRIORITY_RULE = f"must be between {-MAX_PRIORITY_S} and {MAX_PRIORITY_S}"
# Columns whose argument has another name.
_ARGUMENTS = {"task_group": "group"}


def broken_rule(*, constraint: str | None = None,
                null_column: str | None = None) -> tuple[str, str] | None:
    """The argument and the rule a row broke: a CHECK constraint of shardq.tasks by its
    name, or a NOT NULL column; None for a constraint this table does not know."""
    if constraint is not None and constraint in CHECKS:
        return CHECKS[constraint]
    if null_column is not None:
        return _ARGUMENTS.get(null_column, null_column), NOT_NULL
    return None
