"""What a role needs to use shardq's schema, granted by the schema's owner
(``shardq migrate --grants ROLE``).

Three levels, each including the one before:

- ``read-only`` (``--read-only``): the use of the schema and reading its tables (a
  dashboard's role, or a reporting job's), and writing the dashboard's own records: its
  login sessions and the audit trail's rows of refused actions and failed logins;
- ``read-write`` (the default): writing them too (workers and producers: Clients, the
  AsyncClient, the dashboard's actions, Spark's direct writes); on PostgreSQL 17+ also
  MAINTAIN on shardq.tasks, which lets the janitor's vacuum step VACUUM and REINDEX it;
- ``spark`` (``--spark``): CREATE on the schema too, where Spark's staged writes make
  their staging table.

Nothing else is needed: not superuser, not CREATE on the database or on the schema
``public``; LISTEN/NOTIFY, advisory locks and reading ``pg_stat_activity`` need no
grant.  Every level also covers the tables later revisions make
(``ALTER DEFAULT PRIVILEGES FOR ROLE owner``), as long as the schema's owner runs them.
Grants only add: a role granted more before keeps it (``REVOKE`` takes it back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import psycopg
from psycopg import sql

from shardq.core import sqlfiles
from shardq.core.boundary import connect_kwargs, normalize_dsn, role_of, unavailable
from shardq.core.errors import ConfigError, PermissionDenied, SchemaNotReady, map_db_error

Level = Literal["read-only", "read-write", "spark"]
MAINTAIN_SINCE = 170000  # server_version_num of the first PostgreSQL with MAINTAIN
# The files of each level, in order.
FILES: dict[Level, tuple[str, ...]] = {
    "read-only": ("grants_read",),
    "read-write": ("grants_read", "grants_write"),
    "spark": ("grants_read", "grants_write", "grants_spark"),
}
DOES = {
    "read-only": "read-only use",
    "read-write": "read-write use",
    "spark": "read-write use (with CREATE, for Spark's staging tables)",
}


@dataclass(frozen=True)
class Granted:
    """What :func:`grant` granted (or, with ``dry_run``, would grant)."""

    role: str
    """The role granted."""
    owner: str
    """The schema's owner: tables it makes later are covered too."""
    level: Level
    statements: tuple[str, ...]
    """The SQL, as run."""

    def summary(self) -> str:
        """One line for people."""
        return (f"granted {self.role} {DOES[self.level]} of the schema shardq (and of the "
                f"tables later revisions make, when {self.owner} runs them)")


def level_of(*, read_only: bool, spark: bool) -> Level:
    """The level the flags ask for."""
    if read_only and spark:
        raise ConfigError("--read-only and --spark exclude each other: Spark writes tasks")
    return "read-only" if read_only else "spark" if spark else "read-write"


def statements(role: str, owner: str, level: Level, version: int, *,
               dashboard: bool = True) -> list[sql.Composed]:
    """The statements that grant ``role`` the ``level`` of use of the schema that ``owner``
    owns, on a server of ``server_version_num`` ``version``; with ``dashboard`` (a schema
    with the dashboard's sessions and audit trail), the writing of those too."""
    files = list(FILES[level])
    if level != "read-only" and version >= MAINTAIN_SINCE:
        files.insert(2, "grants_maintain")
    if dashboard:
        files.insert(1, "grants_dashboard")
    return [sqlfiles.plain(name, role=role, owner=owner) for name in files]


def grant(dsn: str, role: str, level: Level = "read-write", *, dry_run: bool = False,
          connect_timeout_s: float = 10.0) -> Granted:
    """Grant ``role`` the ``level`` of use of shardq's schema, in one transaction, as the
    role of ``dsn`` (the schema's owner, a member of it, or a superuser); with
    ``dry_run``, only say what would be run."""
    if not role:
        raise ConfigError("--grants needs the name of a role")
    try:
        with psycopg.connect(normalize_dsn(dsn), **connect_kwargs(connect_timeout_s)) as conn:
            owner, version = _owner(conn, role)
            ready = conn.execute(sqlfiles.plain("grants_dashboard_ready")).fetchone()
            run = statements(role, owner, level, version, dashboard=bool(ready and ready[0]))
            texts = tuple(s.as_string(conn) for s in run)
            if not dry_run:
                for statement in run:
                    conn.execute(statement)
    except psycopg.OperationalError as exc:
        if exc.sqlstate is None:  # no connection: libpq's words
            raise unavailable(dsn, exc) from exc
        raise map_db_error(exc, role_of(dsn)) from exc
    except psycopg.Error as exc:
        raise map_db_error(exc, role_of(dsn)) from exc
    return Granted(role, owner, level, texts)


def _owner(conn: psycopg.Connection[tuple[object, ...]], role: str) -> tuple[str, int]:
    """The schema's owner and the server's version, once it is sure that this role may
    grant ``role`` the schema's use."""
    version = conn.execute(sqlfiles.plain("server_version")).fetchone()
    if "CockroachDB" in str(version):
        raise ConfigError("--grants is for PostgreSQL: on CockroachDB, grant the role "
                          "SELECT, INSERT, UPDATE and DELETE on the tables of shardq")
    row = conn.execute(sqlfiles.plain("grants_owner"), {"grantee": role}).fetchone()
    if row is None:
        raise SchemaNotReady("there is no schema shardq to grant the use of")
    owner, me, may_grant, exists, number = row
    if not exists:
        raise ConfigError(f"no role named {role!r}: create it first (with LOGIN and a "
                          "password, for a role that connects)")
    if not may_grant:
        raise PermissionDenied("permission denied to grant the use of the schema shardq",
                               str(me), f"run `shardq migrate --grants {role}` as {owner}, "
                               "the schema's owner")
    return str(owner), int(str(number))
