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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from shardq.core.config import ClientConfig, load
from shardq.core.errors import ConfigError
from shardq.core.validate import MAX_PRIORITY_S
from shardq.ops.results import keep_result_s

KEYS = ("DSN", "DATABASE", "SETTINGS", "KEEP_RESULT_S", "PRIORITY_STEP_S")
DEFAULT_KEEP_RESULT_S = 86400.0
DEFAULT_PRIORITY_STEP_S = 36  # priority 100 is an hour ahead of priority 0
PRIORITY_POINTS = 200  # Django's priorities run from -100 to 100
# Keys of a PostgreSQL alias's OPTIONS that are Django's own, not libpq parameters.
DJANGO_ONLY = frozenset({"isolation_level", "assume_role", "server_side_binding", "pool",
                         "cursor_factory", "context"})


@dataclass(frozen=True)
class Options:
    """One backend's options, checked."""

    database: str | None
    """The ``DATABASES`` alias the queue lives in (None when ``DSN`` names it)."""
    dsn: str | None
    """The queue's database, when ``DSN`` names it."""
    settings: Mapping[str, Any]
    keep_result_s: float
    priority_step_s: int

    def client_config(self, **overrides: Any) -> ClientConfig:
        """The settings of a client of this backend: ``overrides`` that are not None
        (say, a worker's flags) over ``SETTINGS`` over the ``SHARDQ_*`` variables.  The
        database's URL is read now: under Django's test runner an alias names its test
        database."""
        dsn = self.dsn if self.database is None else database_dsn(self.database)
        try:
            given = {k: v for k, v in overrides.items() if v is not None}
            return load(ClientConfig, {**self.settings, "dsn": dsn, **given})
        except ConfigError as exc:
            raise ImproperlyConfigured(f"shardq: {exc}") from exc


def read(alias: str, options: Mapping[str, Any]) -> Options:
    """Check the ``OPTIONS`` of ``TASKS[alias]`` (ImproperlyConfigured, naming the key)."""
    where = f"TASKS[{alias!r}]['OPTIONS']"
    unknown = sorted(set(options) - set(KEYS))
    if unknown:
        raise ImproperlyConfigured(f"{where} has unknown key {unknown[0]!r} (known: "
                                   f"{', '.join(KEYS)})")
    dsn, database = options.get("DSN"), options.get("DATABASE")
    if dsn is not None and database is not None:
        raise ImproperlyConfigured(f"{where}: give DSN or DATABASE, not both")
    if dsn is not None and (not isinstance(dsn, str) or not dsn):
        raise ImproperlyConfigured(f"{where}['DSN'] must be a database URL, got {dsn!r}")
    if database is not None and (not isinstance(database, str) or not database):
        raise ImproperlyConfigured(f"{where}['DATABASE'] must be an alias of DATABASES, "
                                   f"got {database!r}")
    settings = options.get("SETTINGS", {})
    if not isinstance(settings, Mapping) or "dsn" in settings:
        raise ImproperlyConfigured(f"{where}['SETTINGS'] must be a dict of shardq client "
                                   "settings (the database is DSN or DATABASE)")
    keep = options.get("KEEP_RESULT_S", DEFAULT_KEEP_RESULT_S)
    if keep is None:
        raise ImproperlyConfigured(f"{where}['KEEP_RESULT_S'] must be a number of seconds: "
                                   "get_result reads what is kept")
    try:
        keep_result_s(keep, f"{where}['KEEP_RESULT_S']")
    except ConfigError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    step = options.get("PRIORITY_STEP_S", DEFAULT_PRIORITY_STEP_S)
    most = MAX_PRIORITY_S // PRIORITY_POINTS
    if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= most:
        raise ImproperlyConfigured(f"{where}['PRIORITY_STEP_S'] must be a whole number of "
                                   f"seconds from 1 to {most:,}, got {step!r}")
    return Options(database or (None if dsn else "default"), dsn, dict(settings), float(keep),
                   step)


def database_dsn(alias: str) -> str:
    """A libpq URL of Django's database ``alias``, which must be PostgreSQL."""
    if alias not in connections.settings:
        raise ImproperlyConfigured(f"shardq: DATABASES has no alias {alias!r} (set the task "
                                   "backend's OPTIONS['DATABASE'], or OPTIONS['DSN'])")
    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise ImproperlyConfigured(
            f"shardq: DATABASES[{alias!r}] is {connection.vendor}, not PostgreSQL: point the "
            "task backend's OPTIONS['DATABASE'] at a PostgreSQL alias, or name the queue's "
            "database with OPTIONS['DSN']")
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
        host = port = ""
    elif ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = credentials + host + (f":{port}" if port else "")
    for key, value in (database.get("OPTIONS") or {}).items():
        if key not in DJANGO_ONLY and isinstance(value, str | int) and not isinstance(value, bool):
            query[key] = str(value)
    path = quote(str(database.get("NAME") or ""), safe="")
    return f"postgresql://{netloc}/{path}" + (f"?{urlencode(query)}" if query else "")
