"""LISTEN for enqueue notifications (PostgreSQL) and wake the claimers of that queue."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from shardq.core import sqlfiles
from shardq.core.deadline import Watchdog
from shardq.core.listen import QUIET_CHECK_S, check

log = logging.getLogger("shardq.worker")

CHANNEL = "shardq"
RECONNECT_S = 1.0
IDLE_CHECK_S = 1.0


class Listener:
    """A thread holding one connection that LISTENs on channel ``shardq``.

    Each notification carries ``queue`` or ``queue:bucket``; ``on_notify`` is called
    with the queue and the bucket (or None).  On a lost connection it reconnects after
    a pause and calls ``on_notify(None, None)``, since notifications may have been
    missed; polling covers the gap either way.  A connection silent for
    :data:`shardq.core.listen.QUIET_CHECK_S` is checked, so one whose server vanished
    without closing it is found lost too.
    """

    def __init__(self, dsn: str, queues: set[str],
                 on_notify: Callable[[str | None, int | None], None], *,
                 connect_timeout_s: float = 5.0) -> None:
        self.dsn, self.queues, self.on_notify = dsn, queues, on_notify
        self.connect_timeout = max(2, math.ceil(connect_timeout_s))  # libpq: whole seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shardq-listen", daemon=True)
        self._watchdog = Watchdog("shardq-listen-deadline")

    def start(self) -> None:
        """Start listening."""
        self._thread.start()

    def stop(self, timeout_s: float = IDLE_CHECK_S * 3) -> None:
        """Stop listening: the thread ends within about a second; wait up to ``timeout_s``
        for it (0: only ask)."""
        self._stop.set()
        if timeout_s > 0 and self._thread.is_alive():
            self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        lost = False  # told of a lost connection: said once, not at every reconnection
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True,
                                     connect_timeout=self.connect_timeout) as conn:
                    with self._watchdog.guard(conn, self.connect_timeout):
                        conn.execute(sqlfiles.plain("listen", channel=CHANNEL))
                    if lost:
                        lost = False
                        # At the level of the line that said it was lost: a log read at
                        # WARNING must not show an outage that never ends.
                        log.warning("LISTEN connection back (%s:%s)", conn.info.host,
                                    conn.info.port)
                    self.on_notify(None, None)
                    self._serve(conn)
            except psycopg.Error as exc:
                if not lost:
                    lost = True
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc
                    log.warning("LISTEN connection lost (%s); polling until it is back", first)
                self._stop.wait(RECONNECT_S)

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        """Hand each note heard on ``conn`` on; check the connection after a silence
        (raises psycopg's error once it is found dead)."""
        heard_at = time.monotonic()
        while not self._stop.is_set():
            for note in conn.notifies(timeout=IDLE_CHECK_S):
                heard_at = time.monotonic()
                queue, _, bucket = note.payload.partition(":")
                if queue in self.queues:
                    self.on_notify(queue, int(bucket) if bucket.isdigit() else None)
            # A primary that died without closing its connections (a crashed host)
            # leaves this one open and silent: the worker would poll for good, never
            # hearing the new primary's notes.
            if time.monotonic() - heard_at >= QUIET_CHECK_S:
                check(conn, self._watchdog, self.connect_timeout)
                heard_at = time.monotonic()
