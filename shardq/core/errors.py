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


class DurableError(ShardqError, ValueError):
    """A durable call that cannot be made as written: its name used twice in one run,
    a name whose checkpoint is of another kind of call, a value that is not JSON, a
    wait for a task that is not this task's child, or a durable call outside a worker."""


class WaitTimeout(ShardqError):
    """A durable wait (``ctx.wait``) reached its timeout first.  Checkpointed: a replay
    of the task raises it again at the same call."""


class EventTimeout(WaitTimeout):
    """``ctx.wait_event`` reached its timeout before the event was emitted."""


class ChildDied(ShardqError):
    """A child a durable task waits for (``ctx.wait``) died, or ended without a result
    (it was cancelled, or its result expired).  ``child_id`` names it, and the message
    carries its error."""

    def __init__(self, child_id: UUID, error: str) -> None:
        self.child_id = child_id
        super().__init__(f"child task {child_id} {error}")


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


GRANTS_FIX = ("the schema's owner grants a role what shardq needs with `shardq migrate --grants "
              "{role}` (`--read-only`: reads only, as for a dashboard)")


class PermissionDenied(DatabaseError):
    """The database refused this role a privilege (SQLSTATE 42501); nothing was changed.

    ``refused`` is what was refused, in the server's words (``permission denied for table
    tasks``), ``role`` the role it was refused to (None when unknown), and the message
    ends with the fix: by default, the grants of ``shardq migrate --grants ROLE``.
    """

    def __init__(self, refused: str, role: str | None = None, fix: str | None = None) -> None:
        self.refused, self.role = refused, role
        fix = fix if fix is not None else GRANTS_FIX.format(role=role or "ROLE")
        super().__init__(f"{refused} (role {role or 'of this connection'}): {fix}")


class ConnectionLost(DatabaseError):
    """The connection failed while a statement was in flight, and retrying could not
    settle it: whether the server applied the statement is unknown."""


class DiskFull(DatabaseError):
    """The database server found no room to write: its disk (or the tablespace's) is full.
    The statement was rolled back, so nothing of it was written (a batch enqueue
    neither); once there is room again the same call succeeds, and a worker goes on by
    itself.  The cause is chained."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"no room on the database server's disk ({detail}): nothing was "
                         "written; free space on its volume or grow it (or raise its quota); "
                         "shardq goes on by itself once there is room")


# SQLSTATE classes of a statement the server refused for want of a resource (53: disk,
# memory, connections) or for an error of its own system calls (58): the connection
# itself is fine, and the statement was not applied.
REFUSED_FOR_RESOURCES = ("53", "58")
# Extending a table or index file that fails for another reason than ENOSPC (a quota:
# EDQUOT, a size limit: EFBIG) has no SQLSTATE of its own (XX000) but is a full disk
# all the same to whoever writes.
NO_ROOM = ("could not extend file", "No space left on device", "Disk quota exceeded")


def is_disk_full(exc: BaseException) -> bool:
    """A statement refused for want of room: SQLSTATE 53100 (``disk_full``), or a table
    or index file the server could not extend (a quota, a size limit)."""
    import psycopg

    if not isinstance(exc, psycopg.Error) or exc.sqlstate is None:
        return False
    if exc.sqlstate == "53100":
        return True
    message = exc.diag.message_primary or ""
    return exc.sqlstate[:2] in (*REFUSED_FOR_RESOURCES, "XX") and any(
        words in message for words in NO_ROOM)


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

    if not isinstance(exc, psycopg.OperationalError) or isinstance(
            exc, pg_errors.QueryCanceled | pg_errors.InsufficientPrivilege):
        return False
    # A full disk (53100), say, is the server's answer on a working connection.
    return (exc.sqlstate or "")[:2] not in REFUSED_FOR_RESOURCES


def is_lost_statement(exc: BaseException) -> bool:
    """A prepared statement of psycopg's was not found, or its name was taken, on the
    server session: a pooler handed the connection another session (see
    :mod:`shardq.core.pooler`).  The statement itself did not run."""
    from psycopg import errors as pg_errors

    return isinstance(exc, pg_errors.InvalidSqlStatementName
                      | pg_errors.DuplicatePreparedStatement)


def map_db_error(exc: psycopg.Error, role: str | None = None) -> ShardqError:
    """Translate a psycopg error into shardq's hierarchy (``role``: the connection's, named
    by a refusal)."""
    from psycopg import errors as pg_errors

    from shardq.core import rules

    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return PermissionDenied(exc.diag.message_primary or str(exc).strip(), role)
    if is_disk_full(exc):
        return DiskFull(exc.diag.message_primary or type(exc).__name__)
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
