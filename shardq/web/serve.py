"""``shardq dashboard``'s server: the port is bound before anything is announced, and
SIGINT or SIGTERM stop it gracefully, with exit status 0 either way."""

from __future__ import annotations

import errno
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from shardq.core.errors import ConfigError
from shardq.web.config import DashboardConfig

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived before the server ran: leave at once.  A BaseException,
    like KeyboardInterrupt, so that no ``except Exception`` on the way swallows it."""


class Stop:
    """Whether SIGINT or SIGTERM asked the dashboard to stop, and the server to tell."""

    def __init__(self) -> None:
        self.requested = False
        self.server: uvicorn.Server | None = None

    def request(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: stop the server gracefully, or leave if none runs yet."""
        self.requested = True
        if self.server is None:
            raise Stopped
        self.server.should_exit = True


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port``; ConfigError (one line) when the port is in
    use or the address cannot be had."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {host}: {exc.strerror}") from exc
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn does: a restarted dashboard need not wait for the old connections'
        # TIME_WAIT; a port another process listens on is still refused.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use (another shardq dashboard? "
                              "--port picks another)") from exc
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


@contextmanager
def stopped_by_signals() -> Iterator[Stop]:
    """Within the block, SIGINT and SIGTERM stop the dashboard gracefully instead of
    killing the process, so both end with status 0.

    uvicorn catches both while it serves, and after its graceful shutdown raises the
    signal again for the handler that was there before: left to the defaults, SIGTERM
    would then kill the process (status 143), and SIGINT would reach asyncio's own
    handler, which cancels the server's task and, depending on timing, lets a
    CancelledError escape.  Here the handler is :meth:`Stop.request`.
    """
    stop = Stop()
    before = {sig: signal.signal(sig, stop.request) for sig in STOP_SIGNALS}
    try:
        yield stop
    except Stopped:
        pass
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def serve(app: ASGIApp, sock: socket.socket, stop: Stop, config: DashboardConfig) -> None:
    """Serve ``app`` on the bound socket ``sock`` until a signal asks ``stop`` (from
    :func:`stopped_by_signals`) to end it; over HTTPS with ``config``'s certificate."""
    # uvicorn's own reading of X-Forwarded-* is off: the dashboard reads them itself, from
    # its --trusted-proxies only, and needs the peer's address (shardq.web.proxy).
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", proxy_headers=False, ssl_certfile=config.tls_cert_file,
        ssl_keyfile=config.tls_key_file))
    stop.server = server
    if not stop.requested:  # a signal may have come just before the server was known
        server.run(sockets=[sock])
