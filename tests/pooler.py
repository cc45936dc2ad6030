"""A PgBouncer the tests start themselves, in front of a PostgreSQL server on TCP.

Debian's ``pgbouncer`` package (``/usr/sbin/pgbouncer``) is run in the foreground as a
subprocess, with a ``pgbouncer.ini`` and a user list written to a directory of its own,
on a free port of 127.0.0.1.  PgBouncer refuses to run as root: as root, it is given
``-u postgres`` (the directory is the postgres user's, so that it can read its files).
Every database of the server is reached through it under its own name (``* =``), as
the user of the server's URL.

``SHARDQ_TEST_POOLER=transaction`` (or ``session``) makes the suite's ``dsn`` reach its
database through one (see tests/conftest.py); ``pytest -m behaviour`` selects the API's
behavioural tests to run so.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg

from tests.helpers import free_port

BINARY = "/usr/sbin/pgbouncer"
MODES = ("transaction", "session")
READY_TIMEOUT_S = 15.0
USER = "postgres"  # who PgBouncer runs as when started by root (or nobody, without one)


def available() -> bool:
    """Whether PgBouncer is installed (``apt-get install pgbouncer``)."""
    return Path(BINARY).exists() or shutil.which("pgbouncer") is not None


def binary() -> str:
    """The PgBouncer to run: Debian's, else the first on the PATH."""
    return BINARY if Path(BINARY).exists() else str(shutil.which("pgbouncer"))


def through(direct: str, port: int) -> str:
    """``direct`` (a URL of the server) as reached through a PgBouncer on ``port``."""
    parts = urlsplit(direct)
    auth = parts.netloc.rpartition("@")[0]
    netloc = f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def config(server_url: str, mode: str, port: int, workdir: Path, **settings: object) -> str:
    """``pgbouncer.ini`` for a pooler on ``port`` in ``mode`` in front of ``server_url``'s
    server; ``settings`` add to or replace its [pgbouncer] section."""
    server = urlsplit(server_url)
    options = {
        "listen_addr": "127.0.0.1",
        "listen_port": port,
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": workdir / "userlist.txt",
        "pool_mode": mode,
        "default_pool_size": 20,
        # The tests make many databases, each with a pool of its own: idle server
        # connections are closed soon, so that they never fill the server's slots.
        "server_idle_timeout": 10,
        "max_client_conn": 1000,
        "pidfile": workdir / "pgbouncer.pid",
        "logfile": workdir / "pgbouncer.log",
        "admin_users": server.username or USER,
        "log_connections": 0,
        "log_disconnections": 0,
        # The settings psycopg sends at connect that PgBouncer does not carry itself.
        "ignore_startup_parameters": "extra_float_digits",
        **settings,
    }
    lines = ["[databases]", f"* = host={server.hostname} port={server.port or 5432}",
             "", "[pgbouncer]", *(f"{key} = {value}" for key, value in options.items())]
    return "\n".join(lines) + "\n"


class PgBouncer:
    """A running PgBouncer (see :func:`pgbouncer`): where it listens and its log."""

    def __init__(self, server_url: str, port: int, workdir: Path) -> None:
        self.server_url, self.port, self.workdir = server_url, port, workdir

    def url(self, direct: str) -> str:
        """``direct`` (a URL of the server) as reached through this PgBouncer."""
        return through(direct, self.port)

    def admin(self, command: str) -> list[tuple[object, ...]]:
        """The rows of an admin console command (``SHOW POOLS``, ``RECONNECT``, ...)."""
        url = urlunsplit(urlsplit(self.url(self.server_url))._replace(path="/pgbouncer"))
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            cursor = conn.execute(command)
            return cursor.fetchall() if cursor.description else []

    def log(self) -> str:
        """What PgBouncer logged so far."""
        path = self.workdir / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def pgbouncer(server_url: str, mode: str = "transaction", **settings: object
              ) -> Iterator[PgBouncer]:
    """Run a PgBouncer in ``mode`` in front of ``server_url``'s server (a TCP one) until
    the block ends."""
    if mode not in MODES:
        raise ValueError(f"PgBouncer mode {mode!r}: use one of {', '.join(MODES)}")
    workdir = Path(tempfile.mkdtemp(prefix="shardq-pgbouncer-"))
    port = free_port()
    server = urlsplit(server_url)
    (workdir / "userlist.txt").write_text(
        f'"{unquote(server.username or USER)}" "{unquote(server.password or "")}"\n')
    (workdir / "pgbouncer.ini").write_text(config(server_url, mode, port, workdir, **settings))
    command = [binary(), str(workdir / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer will not run as root
        try:
            account = pwd.getpwnam(USER)
        except KeyError:
            account = pwd.getpwnam("nobody")
        for path in [workdir, *workdir.iterdir()]:
            os.chown(path, account.pw_uid, account.pw_gid)
        command[1:1] = ["-u", account.pw_name]
    with (workdir / "stderr.log").open("wb") as stderr:  # what it says before its log opens
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    bouncer = PgBouncer(server_url, port, workdir)
    try:
        _wait_ready(bouncer, process)
        yield bouncer
    finally:
        process.send_signal(signal.SIGINT)  # PgBouncer's immediate shutdown
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_ready(bouncer: PgBouncer, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = (bouncer.workdir / "stderr.log").read_text(errors="replace")
            raise RuntimeError(f"pgbouncer exited with {process.returncode}: "
                               f"{error.strip()}\n{bouncer.log()}")
        if "listening on 127.0.0.1" in bouncer.log():
            return
        time.sleep(0.05)
    raise RuntimeError(f"pgbouncer did not listen within {READY_TIMEOUT_S:g}s\n{bouncer.log()}")
