"""A fault-injecting TCP proxy for the PostgreSQL wire protocol, on 127.0.0.1.

Every client connection gets its own upstream connection and two pump threads.
The pumps cut the byte streams into protocol messages (both directions), which is
what lets the proxy:

- ``cut_all()``: close every connection now, both sides;
- ``blackhole(on)``: forward nothing and read nothing, for existing and new
  connections (a network partition: bytes wait in the kernel and flow on once it
  heals; new connections are accepted but reach the server only then);
- ``half_open(on)``: freeze the connections open now, and those opened while it is
  on, for good: both sockets stay open and are drained, nothing is forwarded (a
  peer that vanished without a FIN); connections opened after it is off are normal;
- ``withhold_reply(pattern, times)``: let the next ``times`` statements matching
  ``pattern`` (a simple Query, or the Bind that runs a parsed or prepared statement)
  reach the server, then drop the server's reply to it and close the connection
  when the server is done with it (ReadyForQuery): the server ran, and in
  autocommit committed, the statement but the client never learns;
- ``withhold_commit(pattern, times)``: the same for the COMMIT of the next ``times``
  transactions in which a statement matching ``pattern`` returned a row (a fold of
  the flows' resolver that released a task, say): the transaction commits, its
  client never learns.

The proxy answers SSL and GSS encryption requests with "N" itself, so the streams
it parses are plaintext.  Pipelined statements are not supported (psycopg sends a
statement and waits for its reply unless told otherwise).
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import struct
import threading
from collections.abc import Iterator

POLL_S = 0.1
NEGOTIATION_CODES = {80877103, 80877104}  # SSLRequest, GSSENCRequest
REPLY_ENDS = {b"C", b"E", b"I"}  # CommandComplete, ErrorResponse, EmptyQueryResponse
FORWARD, ARMED, DROPPING = "forward", "armed", "dropping"
WATCHING, SEEN = "watching", "seen"  # a transaction's statement matched; it returned a row
ENDS = re.compile(rb"^\s*(COMMIT|ROLLBACK|END|ABORT)\b", re.IGNORECASE)


def _messages(buffer: bytearray) -> Iterator[tuple[bytes, bytes]]:
    """Take the complete typed messages off the front of ``buffer``: (type, whole message)."""
    while len(buffer) >= 5:
        length = struct.unpack_from("!I", buffer, 1)[0]
        if len(buffer) < 1 + length:
            return
        message = bytes(buffer[:1 + length])
        del buffer[:1 + length]
        yield message[:1], message


def _cstrings(body: bytes, count: int) -> list[bytes]:
    return body.split(b"\0", count)[:count]


class Link:
    """One proxied connection: the client's socket, the server's, and their state."""

    def __init__(self, proxy: Proxy, client: socket.socket) -> None:
        self.proxy, self.client = proxy, client
        self.server: socket.socket | None = None
        self.frozen = proxy.half_opened
        self.reply = FORWARD  # or ARMED / DROPPING after a matched statement
        self.commit: str | None = None  # WATCHING / SEEN: withhold_commit's transaction
        self.watched = b""  # what of the statement that made it WATCHING matched
        self.closed = threading.Event()
        self.statements: dict[bytes, bytes] = {}  # prepared statement name -> text
        threading.Thread(target=self._run, name="proxy-link", daemon=True).start()

    def close(self) -> None:
        """Close both sockets (idempotent); the pumps end on their next poll."""
        self.closed.set()
        for sock in (self.client, self.server):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        self.proxy.forget(self)

    def _run(self) -> None:
        # A blackhole holds new connections back from the server until it heals.
        while self.proxy.blackholed and not self.closed.wait(POLL_S):
            pass
        if self.closed.is_set():
            return
        try:
            self.server = socket.create_connection(self.proxy.upstream, timeout=5)
        except OSError:
            self.close()
            return
        self.server.settimeout(None)
        threading.Thread(target=self._pump, args=(self.server, self.client, False),
                         name="proxy-down", daemon=True).start()
        self._pump(self.client, self.server, True)

    def _pump(self, src: socket.socket, dst: socket.socket, frontend: bool) -> None:
        buffer = bytearray()
        started = not frontend  # the frontend's first messages are untyped
        try:
            while not self.closed.is_set():
                data = self._receive(src)
                if data is None:
                    break
                if not data:
                    continue
                buffer += data
                if not started:
                    started = self._startup(buffer, dst)
                    if not started:
                        continue  # the StartupMessage is still on its way
                out = self._frontend(buffer) if frontend else self._backend(buffer)
                if out:
                    dst.sendall(out)
        except (OSError, ValueError):
            pass  # a socket closed under us: the link is over
        self.close()

    def _receive(self, src: socket.socket) -> bytes | None:
        """The next bytes to forward from ``src``: none (b"") while it is idle, blackholed
        or frozen, None once it is closed."""
        if not select.select([src], [], [], POLL_S)[0]:
            return b""
        if self.proxy.blackholed and not self.frozen:
            self.closed.wait(POLL_S)  # leave the bytes in the kernel for now
            return b""
        data = src.recv(65536)
        if not data:
            return None
        return b"" if self.frozen else data  # frozen: drained, the peer never hears of it

    def _startup(self, buffer: bytearray, server: socket.socket) -> bool:
        """Handle untyped startup-phase messages; True once the StartupMessage passed."""
        while len(buffer) >= 8:
            length, code = struct.unpack_from("!II", buffer, 0)
            if len(buffer) < length:
                return False
            message = bytes(buffer[:length])
            del buffer[:length]
            if code in NEGOTIATION_CODES:
                self.client.sendall(b"N")  # no encryption: the streams stay parseable
                continue
            server.sendall(message)
            return bool(code != 80877102)  # after a CancelRequest the server just closes
        return False

    def _frontend(self, buffer: bytearray) -> bytes:
        out = bytearray()
        for kind, message in _messages(buffer):
            body = message[5:]
            text: bytes | None = None
            if kind == b"Q":
                text = _cstrings(body, 1)[0]
            elif kind == b"P":
                # Remembered, not matched: a Parse may come in a round trip of its own (as
                # psycopg prepares a statement), whose reply ends before anything ran.
                name, parsed = _cstrings(body, 2)
                self.statements[name] = parsed
            elif kind == b"B":  # the statement runs: named, or the last unnamed Parse
                text = self.statements.get(_cstrings(body, 2)[1])
            if text is not None:
                self._statement(text)
            out += message
        return bytes(out)

    def _statement(self, text: bytes) -> None:
        """A statement on its way to the server: arm what it matches."""
        if self.reply != FORWARD:
            return
        ends = ENDS.match(text) is not None
        # A watched transaction's COMMIT first, so that withhold_reply's turn is not spent.
        watched_end = ends and self.commit == SEEN and self.proxy.take_commit(text, self.watched)
        if watched_end or self.proxy.take_match(text):
            self.reply = ARMED
        if self.commit == WATCHING or ends:  # a watch covers its statement's own reply
            self.commit = None
        if self.commit is None and not ends:
            watched = self.proxy.watches(text)
            if watched is not None:
                self.commit, self.watched = WATCHING, watched

    def _backend(self, buffer: bytearray) -> bytes:
        out = bytearray()
        for kind, message in _messages(buffer):
            if kind == b"D" and self.commit == WATCHING:  # the watched statement's row
                self.commit = SEEN
            elif kind == b"Z" and message[5:6] == b"I":  # no transaction open (autocommit)
                self.commit = None
            if self.reply != FORWARD:
                if kind == b"Z":  # the server is done with the statement: cut now
                    self.closed.set()
                    return bytes(out)
                # Messages before the reply's end (ParseComplete, RowDescription, a COPY's
                # CopyInResponse, which the client must see to send the data) pass.
                if kind in REPLY_ENDS or self.reply == DROPPING:
                    self.reply = DROPPING
                    continue
            out += message
        return bytes(out)


class Proxy:
    """Listens on 127.0.0.1 and forwards to ``upstream``, with faults on demand."""

    def __init__(self, upstream: tuple[str, int], port: int = 0) -> None:
        self.upstream = upstream
        self.blackholed = False
        self.half_opened = False
        self.withheld: list[bytes] = []  # the statements whose reply was dropped
        self._pattern: re.Pattern[bytes] | None = None
        self._times = 0
        self._commit_pattern: re.Pattern[bytes] | None = None
        self._commit_times = 0
        self._links: set[Link] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(POLL_S)
        self._stopped = threading.Event()
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def url(self, dbname: str, user: str = "postgres") -> str:
        """A libpq URL of database ``dbname`` through the proxy."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            with self._lock:
                self._links.add(Link(self, client))

    def forget(self, link: Link) -> None:
        """Drop a closed link from the set."""
        with self._lock:
            self._links.discard(link)

    def take_match(self, text: bytes) -> bool:
        """Whether statement ``text`` is one whose reply is to be withheld (counts it)."""
        with self._lock:
            if self._times <= 0 or self._pattern is None or not self._pattern.search(text):
                return False
            self._times -= 1
            self.withheld.append(text[:80])
            return True

    def watches(self, text: bytes) -> bytes | None:
        """What of statement ``text`` matches withhold_commit's pattern (its transaction
        is then watched), or None."""
        with self._lock:
            pattern = self._commit_pattern
            if self._commit_times <= 0 or pattern is None:
                return None
            found = pattern.search(text)
            return None if found is None else found.group(0)

    def take_commit(self, text: bytes, watched: bytes) -> bool:
        """Whether the COMMIT ``text`` of a transaction in which a statement matching
        ``watched`` returned a row is to be withheld (counts it, as ``COMMIT after
        <watched>``)."""
        with self._lock:
            if self._commit_times <= 0:
                return False
            self._commit_times -= 1
            self.withheld.append(text.strip()[:20] + b" after " + watched)
            return True

    def _snapshot(self) -> list[Link]:
        with self._lock:
            return list(self._links)

    def server_ports(self, client_ports: set[int]) -> set[int]:
        """The local ports of the server sockets of the links whose clients connected
        from ``client_ports``: the ``client_port`` of their backends in
        pg_stat_activity."""
        ports = set()
        for link in self._snapshot():
            with contextlib.suppress(OSError):
                if link.server is not None and link.client.getpeername()[1] in client_ports:
                    ports.add(link.server.getsockname()[1])
        return ports

    @property
    def connections(self) -> int:
        """Links open now."""
        return len(self._snapshot())

    def cut_all(self) -> None:
        """Close every connection now, both ways."""
        for link in self._snapshot():
            link.close()

    def blackhole(self, on: bool) -> None:
        """Forward nothing (existing and new connections) while on."""
        self.blackholed = on

    def half_open(self, on: bool) -> None:
        """Freeze every open connection for good; while on, new ones are frozen too."""
        self.half_opened = on
        if on:
            for link in self._snapshot():
                link.frozen = True

    def withhold_reply(self, pattern: bytes, times: int = 1) -> None:
        """Drop the reply of the next ``times`` statements matching the regex ``pattern``."""
        with self._lock:
            self._pattern, self._times = re.compile(pattern), times

    def withhold_commit(self, pattern: bytes, times: int = 1) -> None:
        """Drop the reply to the COMMIT of the next ``times`` transactions in which a
        statement matching the regex ``pattern`` returned at least one row."""
        with self._lock:
            self._commit_pattern, self._commit_times = re.compile(pattern), times

    @property
    def pending_withholds(self) -> int:
        """Matches still armed."""
        with self._lock:
            return self._times

    @property
    def pending_commits(self) -> int:
        """COMMITs still to withhold (withhold_commit)."""
        with self._lock:
            return self._commit_times

    def close(self) -> None:
        """Stop listening and close every connection."""
        self._stopped.set()
        self._listener.close()
        self.cut_all()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
