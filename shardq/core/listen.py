"""A client's listener: one connection that LISTENs for all of the client's waiting calls.

A call that waits for a notification (:class:`shardq.core.plan.Wait`, such as
``result(wait_s=…)``) subscribes here for the payload it expects and waits on its own
event, holding no pooled connection: a hundred calls waiting at once cost one
connection, and the enqueues beside them find the pool as free as ever.  The listener
connects at the first subscription, on a connection of its own (never the pool's), and
wakes the subscribers of each payload it hears.

A lost listening connection wakes every subscriber (what was announced meanwhile may
have been missed: they look again) and is opened anew after a pause; a connection
silent for :data:`QUIET_CHECK_S` is checked, so one whose server vanished without
closing it is found lost too.  Waiting calls look again on their own every second or
so, so a listener that cannot connect delays them, never loses them.
:class:`Listener` is the blocking client's (a thread), :class:`AsyncListener` the
asyncio client's (a task on its loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

import psycopg

from shardq.core import sqlfiles
from shardq.core.boundary import connect_kwargs
from shardq.core.deadline import Watchdog

log = logging.getLogger("shardq")

RECONNECT_S = 1.0
"""The pause before a lost listening connection is opened again."""
QUIET_CHECK_S = 5.0
"""After this long without a notification the listening connection is checked (a query
under a deadline of the connect timeout): a server that vanished without closing it (a
crashed primary's host) leaves it open and silent for good."""

E = TypeVar("E", threading.Event, asyncio.Event)


def check(conn: psycopg.Connection[Any], watchdog: Watchdog, timeout_s: float) -> None:
    """Ask the server of a listening connection silent for :data:`QUIET_CHECK_S` whether
    it still answers; raises psycopg's error once the connection is found dead (the
    watchdog cuts one whose server never answers within ``timeout_s``)."""
    with watchdog.guard(conn, timeout_s):
        conn.execute(sqlfiles.plain("listen_check"))


class Subscribers(Generic[E]):
    """The events of the calls waiting, by payload (both listeners' bookkeeping)."""

    def __init__(self) -> None:
        self._by_payload: dict[str, set[E]] = {}

    def add(self, payload: str, event: E) -> None:
        """Wake ``event`` when ``payload`` is heard."""
        self._by_payload.setdefault(payload, set()).add(event)

    def remove(self, payload: str, event: E) -> None:
        """Stop waking ``event`` for ``payload``."""
        events = self._by_payload.get(payload)
        if events is not None:
            events.discard(event)
            if not events:
                del self._by_payload[payload]

    def heard(self, payload: str) -> None:
        """Wake the subscribers of ``payload``."""
        for event in list(self._by_payload.get(payload, ())):
            event.set()

    def all(self) -> Iterator[E]:
        """Every subscriber's event (to wake them all after notifications may be lost)."""
        for events in list(self._by_payload.values()):
            yield from list(events)


class Outage:
    """Tells of a listener's lost connection once, not at every failed reconnection."""

    def __init__(self) -> None:
        self.told = False

    def failed(self, exc: Exception) -> None:
        """A connection failed, or could not be made."""
        if not self.told:
            self.told = True
            log.warning("the results listener's connection failed (%s): waiting calls look "
                        "again every second until it is back", exc)

    def over(self) -> None:
        """The listener is connected again."""
        if self.told:
            self.told = False
            log.info("the results listener is connected again")


class Listener:
    """The blocking client's listener on ``channel`` (see the module's docstring)."""

    def __init__(self, dsn: str, channel: str, connect_timeout_s: float) -> None:
        self.dsn, self.channel = dsn, channel
        self.connect_timeout_s = connect_timeout_s
        self._subscribers: Subscribers[threading.Event] = Subscribers()
        self._outage = Outage()
        self._lock = threading.Lock()
        self._tried = threading.Event()  # the first connection was made, or failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Written to on close: wakes the thread from its wait on the connection's socket.
        self._wake_r, self._wake_w = socket.socketpair()
        self._watchdog = Watchdog("shardq-results-listen-deadline")

    def subscribe(self, payload: str) -> threading.Event:
        """An event set when ``payload`` is heard from now on (once the listener
        connected: the first subscription waits up to the connect timeout for that)."""
        event = threading.Event()
        with self._lock:
            if self._stop.is_set():
                return event  # closed: the call only looks again after its pauses
            self._subscribers.add(payload, event)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="shardq-results-listen")
                self._thread.start()
        self._tried.wait(self.connect_timeout_s)
        return event

    def unsubscribe(self, payload: str, event: threading.Event) -> None:
        """Stop keeping ``payload``'s notifications for ``event``."""
        with self._lock:
            self._subscribers.remove(payload, event)

    def close(self) -> None:
        """Close the listening connection and end the thread."""
        with self._lock:
            self._stop.set()
            thread = self._thread
        if thread is None:
            self._close_wake()
            return
        with contextlib.suppress(OSError):  # the thread may have ended and closed it
            self._wake_w.send(b"x")
        thread.join(self.connect_timeout_s)

    def _close_wake(self) -> None:
        self._wake_r.close()
        self._wake_w.close()

    def _wake_all(self) -> None:
        with self._lock:
            for event in self._subscribers.all():
                event.set()

    def _run(self) -> None:
        try:
            self._listen()
        finally:  # the thread's: close() may have stopped waiting for it
            self._close_wake()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True,
                                     **connect_kwargs(self.connect_timeout_s)) as conn:
                    conn.execute(sqlfiles.plain("listen", channel=self.channel))
                    self._tried.set()
                    self._outage.over()
                    self._wake_all()  # what came before was not heard: look again
                    self._serve(conn)
            except psycopg.Error as exc:
                self._tried.set()
                self._wake_all()
                if not self._stop.is_set():
                    self._outage.failed(exc)
                    self._stop.wait(RECONNECT_S)

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not selector.select(QUIET_CHECK_S):
                    check(conn, self._watchdog, self.connect_timeout_s)
                    continue
                # What the socket brought, read without waiting (timeout 0 reads once).
                for note in conn.notifies(timeout=0):
                    with self._lock:
                        self._subscribers.heard(note.payload)


class AsyncListener:
    """The asyncio client's listener on ``channel`` (see the module's docstring): a
    task on the loop the client runs on."""

    def __init__(self, dsn: str, channel: str, connect_timeout_s: float) -> None:
        self.dsn, self.channel = dsn, channel
        self.connect_timeout_s = connect_timeout_s
        self._subscribers: Subscribers[asyncio.Event] = Subscribers()
        self._outage = Outage()
        self._tried = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def subscribe(self, payload: str) -> asyncio.Event:
        """An event set when ``payload`` is heard from now on (see
        :meth:`Listener.subscribe`)."""
        event = asyncio.Event()
        if self._closed:
            return event
        self._subscribers.add(payload, event)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="shardq-results-listen")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.connect_timeout_s):
                await self._tried.wait()
        return event

    def unsubscribe(self, payload: str, event: asyncio.Event) -> None:
        """Stop keeping ``payload``'s notifications for ``event``."""
        self._subscribers.remove(payload, event)

    async def close(self) -> None:
        """Close the listening connection and end the task."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _wake_all(self) -> None:
        for event in self._subscribers.all():
            event.set()

    async def _run(self) -> None:
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, **connect_kwargs(self.connect_timeout_s))
                async with conn:
                    await conn.execute(sqlfiles.plain("listen", channel=self.channel))
                    self._tried.set()
                    self._outage.over()
                    self._wake_all()
                    await self._serve(conn)
            except (psycopg.Error, TimeoutError) as exc:
                self._tried.set()
                self._wake_all()
                self._outage.failed(exc)
                await asyncio.sleep(RECONNECT_S)


    async def _serve(self, conn: psycopg.AsyncConnection[Any]) -> None:
        while True:
            heard = False
            async for note in conn.notifies(timeout=QUIET_CHECK_S):
                heard = True
                self._subscribers.heard(note.payload)
            if not heard:  # a silence: does the server still answer?
                async with asyncio.timeout(self.connect_timeout_s):
                    await conn.execute(sqlfiles.plain("listen_check"))


L = TypeVar("L", Listener, AsyncListener)


class Listeners(Generic[L]):
    """A client's listeners, one per channel, made at the first subscription to it."""

    def __init__(self, kind: type[L], dsn: str, connect_timeout_s: float) -> None:
        self.kind: type[L] = kind
        self.dsn, self.connect_timeout_s = dsn, connect_timeout_s
        self.made: dict[str, L] = {}
        self._lock = threading.Lock()

    def on(self, channel: str) -> L:
        """The listener on ``channel``."""
        with self._lock:
            listener = self.made.get(channel)
            if listener is None:
                listener = self.made[channel] = self.kind(self.dsn, channel,
                                                          self.connect_timeout_s)
            return listener
