"""A backend's ``OPTIONS``: which database holds the queue, and how tasks are kept.

``DSN`` names the database outright; otherwise ``DATABASE`` (default ``"default"``)
names an alias of Django's ``DATABASES``, which must be PostgreSQL, and its settings
become a libpq URL.  ``SETTINGS`` are :class:`shardq.ClientConfig` settings
(``{"max_attempts": 3}``), over the ``SHARDQ_*`` variables.  ``KEEP_RESULT_S`` is how
long a succeeded task's return value stays readable (default a day), and ``PRIORITY_STEP_S``
the seconds of head start one point of Django's priority is worth (default 36: see
:func:`shardq.contrib.django.backend.head_start`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from shardq.core.config import ClientConfig, load
from shardq.core.dsn import authority
from shardq.core.errors import ConfigError
from shardq.core.rules import MAX_PRIORITY_S
from shardq.core.validate import QUEUE_NAME
from shardq.ops.results import keep_result_s

KEYS = ("DSN", "DATABASE", "SETTINGS", "KEEP_RESULT_S", "PRIORITY_STEP_S")
DEFAULT_KEEP_RESULT_S = 86400.0
DEFAULT_PRIORITY_STEP_S = 36  # priority 100 is an hour ahead of priority 0
PRIORITY_POINTS = 200  # Django's priorities run from -100 to 100
# Keys of a PostgreSQL alias's OPTIONS that are Django's own, not libpq parameters.
DJANGO_ONLY = frozenset({"isolation_level", "assume_role", "server_side_binding", "pool",
                         "cursor_factory", "context"})


class Misconfigured(ImproperlyConfigured):
    """A task backend's setting shardq cannot use, in one line: ``message`` says what is
    wrong and ``hint`` how to fix it; ``manage.py check`` reports it as ``check_id``
    (see :mod:`shardq.contrib.django.checks`)."""

    def __init__(self, check_id: str, message: str, hint: str) -> None:
        super().__init__(f"{message}: {hint}")
        self.check_id, self.message, self.hint = check_id, message, hint


@dataclass(frozen=True)
class Options:
    """One backend's options, checked."""

    backend: str
    """The backend's alias in ``TASKS``."""
    database: str | None
    """The ``DATABASES`` alias the queue lives in (None when ``DSN`` names it)."""
    dsn: str | None
    """The queue's database, when ``DSN`` names it."""
    settings: Mapping[str, Any]
    keep_result_s: float
    priority_step_s: int

    def queue_dsn(self) -> str:
        """The URL of the queue's database: ``DSN``, or the ``DATABASE`` alias's, read now
        (under Django's test runner an alias names its test database)."""
        if self.dsn is not None:  # then there is no DATABASE: read() allows one of the two
            return self.dsn
        assert self.database is not None
        return database_dsn(self.database, f"TASKS[{self.backend!r}]")

    def client_config(self, **overrides: Any) -> ClientConfig:
        """The settings of a client of this backend: ``overrides`` that are not None
        (say, a worker's flags) over ``SETTINGS`` over the ``SHARDQ_*`` variables, on
        :meth:`queue_dsn`."""
        dsn = self.queue_dsn()
        given = {k: v for k, v in overrides.items() if v is not None}
        try:
            return load(ClientConfig, {**self.settings, "dsn": dsn, **given})
        except ConfigError as exc:
            raise Misconfigured("shardq.E005", f"TASKS[{self.backend!r}]: {exc}",
                                SETTINGS_HINT) from exc


SETTINGS_HINT = ("OPTIONS['SETTINGS'] holds shardq client settings, over the SHARDQ_* "
                 "variables (`shardq consume --help-all` lists them)")
OPTIONS_HINT = f"OPTIONS takes {', '.join(KEYS)} (see shardq's Django guide)"


def check_queues(alias: str, queues: Iterable[Any]) -> None:
    """Raise Misconfigured unless each of ``TASKS[alias]['QUEUES']`` is a shardq queue name."""
    for queue in sorted(queues, key=repr):
        if not isinstance(queue, str) or not QUEUE_NAME.fullmatch(queue):
            raise Misconfigured(
                "shardq.E006", f"TASKS[{alias!r}]['QUEUES'] has {queue!r}, which is not a "
                "shardq queue name", "use 1-128 letters, digits, '_', '.', ':' or '-'")


def read(alias: str, options: Mapping[str, Any]) -> Options:
    """Check the ``OPTIONS`` of ``TASKS[alias]`` (Misconfigured, naming the key)."""
    where = f"TASKS[{alias!r}]['OPTIONS']"

    def bad(message: str, hint: str = OPTIONS_HINT) -> Misconfigured:
        return Misconfigured("shardq.E001", f"{where}{message}", hint)

    unknown = sorted(set(options) - set(KEYS))
    if unknown:
        raise bad(f" has unknown key {unknown[0]!r}")
    dsn, database = options.get("DSN"), options.get("DATABASE")
    if dsn is not None and database is not None:
        raise bad(" has both DSN and DATABASE", "give DSN (a database of the queue's own) "
                  "or DATABASE (an alias of DATABASES), not both")
    if dsn is not None:
        check_dsn(where, dsn)
    if database is not None and (not isinstance(database, str) or not database):
        raise bad(f"['DATABASE'] must be an alias of DATABASES, got {database!r}",
                  f"name one of {aliases()}")
    settings = options.get("SETTINGS", {})
    if not isinstance(settings, Mapping) or "dsn" in settings:
        raise bad("['SETTINGS'] must be a dict of shardq client settings, without 'dsn'",
                  "the database is OPTIONS['DSN'] or OPTIONS['DATABASE']; " + SETTINGS_HINT)
    keep = options.get("KEEP_RESULT_S", DEFAULT_KEEP_RESULT_S)
    if keep is None:
        raise bad("['KEEP_RESULT_S'] must be a number of seconds",
                  "get_result reads what is kept: leave it out to keep results a day")
    try:
        keep_result_s(keep, f"{where}['KEEP_RESULT_S']")
    except ConfigError as exc:
        raise Misconfigured("shardq.E001", str(exc), "leave it out to keep results a day") from None
    step = options.get("PRIORITY_STEP_S", DEFAULT_PRIORITY_STEP_S)
    most = MAX_PRIORITY_S // PRIORITY_POINTS
    if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= most:
        raise bad(f"['PRIORITY_STEP_S'] must be a whole number of seconds from 1 to "
                  f"{most:,}, got {step!r}", "leave it out for 36 s: priority 100 then runs an "
                  "hour ahead of priority 0")
    return Options(alias, database or (None if dsn else "default"), dsn, dict(settings),
                   float(keep), step)


def check_dsn(where: str, dsn: Any) -> None:
    """Raise Misconfigured unless ``dsn`` names a database shardq speaks to (PostgreSQL,
    or CockroachDB): a ``postgresql://`` URL or libpq's ``key=value`` settings."""
    if not isinstance(dsn, str) or not dsn:
        problem = f"must be a database URL, got {dsn!r}"
    else:
        try:
            ClientConfig(dsn=dsn)
            return
        except ConfigError:
            scheme, sep, _ = dsn.partition("://")
            problem = (f"is a {scheme}:// URL, not a PostgreSQL database" if sep else
                       "is neither a URL nor libpq key=value settings")  # not echoed: a secret?
    raise Misconfigured("shardq.E004", f"{where}['DSN'] {problem}",
                        "give a postgresql://user:password@host:port/dbname URL "
                        "(cockroachdb:// for CockroachDB)")


def aliases() -> str:
    """The aliases of ``DATABASES``, for a hint."""
    return ", ".join(repr(a) for a in connections.settings) or "none (DATABASES is empty)"


def database_dsn(alias: str, backend: str) -> str:
    """A libpq URL of Django's database ``alias``, which must be PostgreSQL; ``backend``
    names the task backend whose queue lives there (``TASKS['default']``)."""
    where = f"{backend} keeps its queue in DATABASES[{alias!r}] (OPTIONS['DATABASE'])"
    if alias not in connections.settings:
        raise Misconfigured(
            "shardq.E002", f"{where}, which does not exist",
            f"set OPTIONS['DATABASE'] to one of {aliases()}, or give the queue's database as "
            "OPTIONS['DSN']")
    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise Misconfigured(
            "shardq.E003", f"{where}, which is {connection.vendor}, not PostgreSQL",
            "point OPTIONS['DATABASE'] at a PostgreSQL alias, or give the queue's database as "
            "OPTIONS['DSN']")
    return url_of(connection.settings_dict)


def url_of(database: Mapping[str, Any]) -> str:
    """``postgresql://user:password@host:port/name?params`` of a Django database's
    settings; a socket directory as HOST and libpq's own OPTIONS (sslmode, service, ...)
    go into the query."""
    user = quote(str(database.get("USER") or ""), safe="")
    password = quote(str(database.get("PASSWORD") or ""), safe="")
    credentials = f"{user}:{password}@" if password else f"{user}@" if user else ""
    host, port = str(database.get("HOST") or ""), str(database.get("PORT") or "")
    query: dict[str, str] = {}
    if host.startswith("/"):  # a Unix socket's directory: only the query can hold it
        query.update(host=host, **({"port": port} if port else {}))
        netloc = credentials
    else:
        netloc = credentials + authority(host, port)  # "db1,db2": a failover pair
    for key, value in (database.get("OPTIONS") or {}).items():
        if key not in DJANGO_ONLY and isinstance(value, str | int) and not isinstance(value, bool):
            query[key] = str(value)
    path = quote(str(database.get("NAME") or ""), safe="")
    return f"postgresql://{netloc}/{path}" + (f"?{urlencode(query)}" if query else "")

