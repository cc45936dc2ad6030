"""shardq's error hierarchy, and the one place database errors are mapped onto it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    import psycopg

# The functions below import psycopg themselves: they only run once a database error
# was raised, and at module level psycopg would cost every CLI call (even ``--help``)
# its import time.


class ShardqError(Exception):
    """Base class of every error shardq raises."""


class ConfigError(ShardqError, ValueError):
    """A setting is missing or out of range."""


class InvalidTask(ShardqError, ValueError):
    """Input that cannot become a task (bad payload, queue name, time, arguments that do not
    fit the task function, ...); nothing was written."""


KNOWN_SHOWN = 20  # queues an UnknownQueue message names; a count stands for the rest


class UnknownQueue(InvalidTask):
    """A queue control call named a queue shardq does not know: it has no tasks, is not
    paused and was not active in the last hour (a typo, most likely).  Nothing was
    changed; ``known`` lists the queues there are."""

    def __init__(self, queue: str, known: Sequence[str], hint: str = "") -> None:
        self.queue, self.known = queue, list(known)
        shown = ", ".join(self.known[:KNOWN_SHOWN]) or "none"
        if len(self.known) > KNOWN_SHOWN:
            shown += f" and {len(self.known) - KNOWN_SHOWN} more"
        super().__init__(f"no queue named {queue!r}: it has no tasks, is not paused and was "
                         f"not active in the last hour (known queues: {shown})"
                         + (f"; {hint}" if hint else ""))


class SchemaNotReady(ShardqError):
    """The database has no (or an incompatible) shardq schema."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"{detail}: create or upgrade the schema with `shardq migrate` "
            "(or `alembic upgrade head` from a checkout)"
        )


class LeaseLost(ShardqError):
    """The lease on these tasks ended and another claim may hold them; nothing was changed for them.

    ``task_ids`` lists the tasks whose operation was refused.  In a batch call the
    other tasks were processed.
    """

    def __init__(self, task_ids: Iterable[UUID]) -> None:
        self.task_ids = list(task_ids)
        super().__init__(f"lease lost for {len(self.task_ids)} task(s): {self.task_ids[:5]}")


class SparkWriteError(ShardqError):
    """A Spark job writing tasks (:func:`shardq.spark.write_tasks`) failed.

    When a row broke a rule of shardq.tasks, ``column`` names its argument (``payload``,
    ``queue``, ``key``, ...) and ``rule`` what it must be; otherwise both are None and the
    message is the failure's own first line.  The Spark or Java error is chained as
    ``__cause__``.  What was written is said in the message: nothing (a staged write),
    or nothing of the failing partition (a direct append; see its guarantee).
    """

    def __init__(self, message: str, column: str | None = None,
                 rule: str | None = None) -> None:
        self.column, self.rule = column, rule
        super().__init__(message)


class DatabaseError(ShardqError):
    """A database error shardq has no more specific class for (the cause is chained)."""


class Unavailable(DatabaseError):
    """No connection to the database could be made (the message names the cause)."""


class ConnectionLost(DatabaseError):
    """The connection failed while a statement was in flight, and retrying could not
    settle it: whether the server applied the statement is unknown."""


def is_transient(exc: BaseException) -> bool:
    """Failures after which the same work certainly may run again: serialization
    failures (SQLSTATE 40001), which roll the transaction back, and writes a read-only
    server refused (see :func:`is_read_only`)."""
    from psycopg import errors as pg_errors

    return isinstance(exc, pg_errors.SerializationFailure) or is_read_only(exc)


def is_read_only(exc: BaseException) -> bool:
    """A write refused because the server is read-only (SQLSTATE 25006): a standby, or a
    primary on its way to becoming one (a planned switchover first makes it refuse
    writes, then restarts it).  Nothing was written: the statement, and its transaction,
    failed before changing anything.  The connection is to the wrong server, and a new
    one finds the primary when the DSN asks for ``target_session_attrs=read-write``."""
    from psycopg import errors as pg_errors

    return isinstance(exc, pg_errors.ReadOnlySqlTransaction)


def is_connection_loss(exc: BaseException) -> bool:
    """A lost or unusable connection (not a statement the server refused)."""
    import psycopg
    from psycopg import errors as pg_errors

    return isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, pg_errors.QueryCanceled | pg_errors.InsufficientPrivilege
    )


def map_db_error(exc: psycopg.Error) -> ShardqError:
    """Translate a psycopg error into shardq's hierarchy."""
    from psycopg import errors as pg_errors

    from shardq.core import rules

    if isinstance(exc, pg_errors.UndefinedTable | pg_errors.InvalidSchemaName):
        return SchemaNotReady(f"the shardq schema is missing ({exc.diag.message_primary})")
    if isinstance(exc, pg_errors.UndefinedColumn):
        return SchemaNotReady(f"the shardq schema is out of date ({exc.diag.message_primary})")
    if isinstance(exc, pg_errors.CheckViolation | pg_errors.NotNullViolation):
        broken = (rules.broken_rule(constraint=exc.diag.constraint_name)
                  if isinstance(exc, pg_errors.CheckViolation)
                  else rules.broken_rule(null_column=exc.diag.column_name))
        if broken:
            return InvalidTask(": ".join(broken))
        return InvalidTask(f"the database refused the task: {exc.diag.message_primary}")
    if is_read_only(exc):
        return DatabaseError(f"{exc.diag.message_primary}: the server is read-only (a standby?); "
                             "name the primary, or every node with "
                             "target_session_attrs=read-write")
    return DatabaseError(str(exc).strip() or type(exc).__name__)
