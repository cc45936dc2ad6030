"""COPY FROM STDIN with the client's work overlapped with the server's (psycopg 3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.abc import PQGen
from psycopg.copy import LibpqWriter
from psycopg.errors import error_from_result
from psycopg.pq import ExecStatus
from psycopg.pq.abc import PGconn, PGresult
from psycopg.waiting import Wait


class EndThenWork(LibpqWriter):
    """A COPY writer that sends the end of the data, runs ``meanwhile`` while the server
    writes the rows, and only then waits for the server's reply.

    A binary COPY buffers its rows and writes them to the heap and the indexes when the
    data ends, so the client would otherwise idle through the costliest part of the
    statement.  The reply is read whatever ``meanwhile`` does: the connection is never
    left inside a statement.
    """

    def __init__(self, cursor: psycopg.Cursor[Any], meanwhile: Callable[[], object]) -> None:
        super().__init__(cursor)
        self.meanwhile = meanwhile

    def finish(self, exc: BaseException | None = None) -> None:
        """End the data (or abort it with ``exc``), work meanwhile, read the reply."""
        if exc is not None:
            super().finish(exc)
            return
        pgconn = self.connection.pgconn
        self.connection.wait(_send_copy_end(pgconn))
        try:
            self.meanwhile()
        finally:
            results = self.connection.wait(_results(pgconn))
        if not results or results[0].status != ExecStatus.COMMAND_OK:
            raise (error_from_result(results[0], encoding=self.connection.info.encoding)
                   if results else psycopg.OperationalError("no reply to the end of a COPY"))


def _send_copy_end(pgconn: PGconn) -> PQGen[None]:
    """Queue the end of the COPY data and flush it (libpq is in non-blocking mode)."""
    while not pgconn.put_copy_end(None):  # libpq's buffer is full: wait for the socket
        yield Wait.W
    while pgconn.flush():
        yield Wait.W


def _results(pgconn: PGconn) -> PQGen[list[PGresult]]:
    """Every result of the statement under way, reading only when the socket is ready
    (``get_result`` blocks while libpq is busy)."""
    results: list[PGresult] = []
    while True:
        pgconn.consume_input()
        while pgconn.is_busy():
            yield Wait.R
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            return results
        results.append(result)
