"""The statements' composition: every statement names a task's bucket through one
function (``shardq.core.sqlfiles.bucket_of``), so that a layout whose bucket is not a
stored column changes it in one place (docs/design.md, "Changing the bucket count")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from shardq.core import sqlfiles
from tests.conftest import ROOT

COLUMN = "bucket_column_marker"


def statements() -> Iterator[tuple[str, str]]:
    """(dialect, name) of every statement file, the shared ones for both engines."""
    sql_dir = Path(ROOT) / "sql"
    for dialect in ("postgresql", "cockroachdb"):
        names = {f.stem for f in sql_dir.glob("*.sql")}
        names |= {f.stem for f in (sql_dir / dialect).glob("*.sql")}
        for name in sorted(names):
            yield dialect, name


@pytest.fixture
def marked(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """bucket_of writes a marker instead of the column (and the caches are emptied
    around the test, so that nothing composed with the marker outlives it)."""
    def marker(bucket: str, alias: str | None = None) -> sql.Composable:
        return sql.SQL("<<bucket of {}>>").format(sql.SQL(alias or "-"))

    sqlfiles.query.cache_clear()
    monkeypatch.setattr(sqlfiles, "bucket_of", marker)
    yield
    sqlfiles.query.cache_clear()


def test_every_statement_names_the_bucket_through_bucket_of(marked: None) -> None:
    composed = 0
    for dialect, name in statements():
        try:
            text = sqlfiles.query(name, dialect, COLUMN, 100).as_string(None)
        except (KeyError, ValueError, IndexError):  # a fragment that needs its caller's parts
            continue
        composed += 1
        assert COLUMN not in text, (dialect, name)
        # The raw placeholder never reaches a statement.
        assert "{bucket}" not in text, (dialect, name)
    assert composed > 300


def test_a_qualified_bucket_keeps_its_alias(marked: None) -> None:
    text = sqlfiles.query("claim", "postgresql", COLUMN, 10).as_string(None)
    assert re.search(r"<<bucket of t>> AS bucket", text)
    assert "<<bucket of ->> = %(bucket)s" in text


# Where a statement's text may still say "bucket" once bucket_of wrote the row's: a
# bound parameter, a name of its own (a column it returns, a series' or a list's
# column) and the marker.
NOT_THE_COLUMN = re.compile(r"%\(bucket\)s|AS bucket\b|\w+\(bucket\)|\b(?:listed|b|ins|r)\.bucket\b"
                            r"|<<bucket of|\bbucket_count\b")


def test_no_statement_names_the_bucket_column_itself(marked: None) -> None:
    """A statement that wrote ``bucket`` (or ``t.bucket``) in its text would read a column
    that a resharded schema no longer has."""
    for dialect, name in statements():
        if name == "reshard_drop_column":  # the one statement about the column itself
            continue
        try:
            text = sqlfiles.query(name, dialect, COLUMN, 100).as_string(None)
        except (KeyError, ValueError, IndexError):
            continue
        code = "\n".join(line.split("--")[0] for line in text.splitlines())
        code = re.sub(r"'[^']*'", "''", code)  # a string literal names no column
        left = re.findall(r"[\w.(]*\bbucket\b[\w)]*", NOT_THE_COLUMN.sub("", code))
        assert not left, (dialect, name, left)
