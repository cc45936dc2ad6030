"""``manage.py check`` for shardq's task backends (registered by the app's ``ready()``).

Each ``TASKS`` entry whose ``BACKEND`` is :class:`ShardqBackend` is checked without a
database: its ``QUEUES`` (``shardq.E006``), its ``OPTIONS`` (``E001``, a ``DSN`` that is
not PostgreSQL ``E004``), the ``DATABASE`` alias (missing ``E002``, not PostgreSQL
``E003``) and its client ``SETTINGS`` (``E005``); these are the errors the backend would
raise at its first use.  With ``check --database ALIAS`` (Django's database checks,
which ``migrate`` and the test runner run too), a backend whose queue lives in a checked
alias is also connected to: ``E007`` when that fails, ``W001`` when the shardq schema is
missing or older than this shardq (``manage.py shardq_migrate`` creates or upgrades
it).  A backend with a ``DSN`` of its own is not: Django's checks name aliases, and the
test runner's would otherwise reach out to that database.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.core.checks import Warning as CheckWarning
from django.utils.module_loading import import_string
from psycopg.conninfo import conninfo_to_dict

from shardq.contrib.django import options
from shardq.contrib.django.backend import ShardqBackend
from shardq.core.errors import ShardqError

TAG = "shardq"  # manage.py check --tag shardq runs these alone


def backends() -> Iterator[ShardqBackend]:
    """A backend for each ``TASKS`` entry of ours (made afresh: it opens nothing)."""
    for alias, params in (getattr(settings, "TASKS", None) or {}).items():
        try:
            kind = import_string(params["BACKEND"])
        except (ImportError, KeyError, TypeError):  # not ours to report
            continue
        if isinstance(kind, type) and issubclass(kind, ShardqBackend):
            yield kind(alias, params)


@register(TAG)
def check_configuration(app_configs: Sequence[AppConfig] | None = None,
                        **kwargs: Any) -> list[CheckMessage]:
    """The errors of each shardq backend's QUEUES, OPTIONS, database alias and client
    settings; no database is touched."""
    found: list[CheckMessage] = []
    for backend in backends():
        try:
            options.check_queues(backend.alias, backend.queues)
        except options.Misconfigured as exc:
            found.append(_error(exc))
        try:
            options.read(backend.alias, backend.options).client_config()
        except options.Misconfigured as exc:
            found.append(_error(exc))
    return found


@register(Tags.database, TAG)
def check_schema(app_configs: Sequence[AppConfig] | None = None,
                 databases: Sequence[str] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """With Django's database checks only: whether each backend's queue database answers
    and has the shardq schema at this shardq's revision."""
    if databases is None:
        return []
    from shardq.core import migrate  # Alembic: for this check only, not every process

    found: list[CheckMessage] = []
    for backend in backends():
        try:
            config = backend.settings.client_config()
        except options.Misconfigured:  # check_configuration reports it
            continue
        database = backend.settings.database
        if database is None or database not in databases or config.dsn is None:
            continue
        where = f"the queue database of TASKS[{backend.alias!r}] (DATABASES[{database!r}])"
        try:
            revision = migrate.current(_with_timeout(config.dsn, config.connect_timeout_s))
        except ShardqError as exc:
            found.append(Error(f"{where} cannot be read: {str(exc).removeprefix('migrate: ')}",
                               hint="check that its server runs and that the settings name "
                                    "it", id="shardq.E007"))
            continue
        if revision != migrate.head():
            state = "has no shardq schema" if revision is None else (
                f"has the shardq schema at revision {revision}, not {migrate.head()}")
            found.append(CheckWarning(f"{where} {state}",
                                      hint="run `manage.py shardq_migrate`", id="shardq.W001"))
    return found


def _error(exc: options.Misconfigured) -> Error:
    return Error(exc.message, hint=exc.hint, id=exc.check_id)


def _with_timeout(dsn: str, timeout_s: float) -> str:
    """``dsn`` (an alias's URL) bounded by the client's connect timeout unless it sets
    its own: a check must not hang on a server that does not answer."""
    params: dict[str, Any] = conninfo_to_dict(dsn)
    params.setdefault("connect_timeout", max(2, math.ceil(timeout_s)))  # libpq: whole s
    return options.url_of({"NAME": params.pop("dbname", ""), "USER": params.pop("user", ""),
                           "PASSWORD": params.pop("password", ""),
                           "HOST": params.pop("host", ""), "PORT": params.pop("port", ""),
                           "OPTIONS": params})
