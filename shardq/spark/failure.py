"""A failed Spark write as one line: the column and the rule a row broke, or the cause.

Spark reports a refused row as a Py4JJavaError of some 15,000 characters (the Java
stack of the driver and of the executor, the failed JDBC batch with its rows); the
database's own sentence sits in it as a ``PSQLException`` line.  That sentence names
the NOT NULL column or the CHECK constraint, which :func:`shardq.core.rules.broken_rule`
turns into the argument and its rule.  The whole error stays the ``__cause__``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg import errors as pg_errors

from shardq.core import rules
from shardq.core.errors import InvalidTask, SparkWriteError
from shardq.spark import frame

# PostgreSQL's (and CockroachDB's) sentences for SQLSTATE 23502, 23514 and 22P02 on a
# json(b) column; "of relation" came with PostgreSQL 13.
_NOT_NULL = re.compile(r'null value in column "([^"]+)"(?: of relation "[^"]+")? '
                       r"violates not-null constraint")
_CHECK = re.compile(r'violates check constraint "([^"]+)"')
_JSON = re.compile(r"invalid input syntax for type jsonb?\b")
# A rule frame.py checks in Spark itself, raised with raise_error().
_RAISED = re.compile(re.escape(frame.RAISED) + r" (\w+): (.*?)(?: SQLSTATE: \w+)?$", re.M)
# The first line worth showing when no rule was broken, best first: the database's
# error, Spark's error class and message, the innermost Java cause.
_SUMMARIES = (
    re.compile(r"PSQLException: (ERROR: [^\n]*)"),
    re.compile(r"(\[[A-Z][A-Z_.]*\] [^\n]*)"),
)
_CAUSE = re.compile(r"Caused by: ([^\n]*)")
# pgjdbc's words when the server's certificate is refused: its CA, or the name in it.
_TLS = re.compile(r"PSQLException: ((?:SSL error: |The hostname )[^\n]*)")
TLS_HINT = ("the server's certificate was refused over JDBC (is sslrootcert the CA that "
            "signed it, for the host in the URL?)")
SUMMARY_CHARS = 300

# What a failed write leaves: nothing (staged: the merge is one transaction), nothing
# of the failing partition (direct: one transaction per partition), or committed
# batches of it too (direct with isolationLevel NONE, set through jdbc_options).
STAGED = "nothing was written"
STAGED_BATCH = "nothing was written, and on_complete will not run"
DIRECT = "the failing partition wrote nothing; other partitions may have committed theirs"
BATCHES = "batches of the failing partition and other partitions may have committed"


def broken_rule(text: str) -> tuple[str, str] | None:
    """The argument and the rule a refused row broke, read from a Spark error's text."""
    if found := _CHECK.search(text):
        return rules.broken_rule(constraint=found.group(1))
    if found := _NOT_NULL.search(text):
        return rules.broken_rule(null_column=found.group(1))
    if found := _RAISED.search(text):
        return found.group(1), found.group(2)
    if _JSON.search(text):  # the payload is the one JSON column a write sends
        return "payload", "must be JSON text"
    return None


def summary(text: str) -> str:
    """One line of a Spark error that says what failed, cut to SUMMARY_CHARS."""
    if found := _TLS.search(text):
        return f"{TLS_HINT}: {found.group(1).strip()[:SUMMARY_CHARS]}"
    for pattern in _SUMMARIES:
        if found := pattern.search(text):
            return found.group(1).strip()[:SUMMARY_CHARS]
    causes = _CAUSE.findall(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = causes[-1] if causes else (lines[0] if lines else "no message")
    return line[:SUMMARY_CHARS]


def write_error(exc: BaseException, *, written: str) -> SparkWriteError:
    """``exc`` (Spark's, Java's or a refused merge's) as one line, ending with
    ``written``: what the failed write leaves (:data:`STAGED`, :data:`DIRECT`, ...)."""
    text = str(exc)
    refused = exc.__cause__
    if isinstance(refused, pg_errors.CheckViolation | pg_errors.NotNullViolation):
        broken = rules.broken_rule(constraint=refused.diag.constraint_name,
                                      null_column=refused.diag.column_name)
    else:
        broken = broken_rule(text)
    if broken is None:
        return SparkWriteError(f"the Spark write failed: {summary(text)} ({written})")
    column, rule = broken
    return SparkWriteError(f"{column}: {rule} ({written})", column, rule)


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a failed Spark action raises in Python (PySpark's own, and Py4J's
    for a Java exception PySpark does not convert)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return PySparkException, Py4JJavaError


@contextmanager
def reported(written: str) -> Iterator[None]:
    """Raise a failed Spark write (or merge) as one :class:`SparkWriteError` line that
    ends with ``written``."""
    caught: tuple[type[BaseException], ...] = (*spark_errors(), InvalidTask)
    try:
        yield
    except caught as exc:
        raise write_error(exc, written=written) from exc
