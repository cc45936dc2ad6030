"""docs/how-to/security.md runs, on a server of its own that takes TLS connections only
(tests/tls.py): its administrator is ``postgres``, ``$DB_HOST`` its address, ``ca.pem``
the CA that signed its certificate.  The roles the page makes live and die with that
server.  The statements the page prints, and the lines it quotes, are checked against
what the commands print."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import psycopg
import pytest

from tests.helpers import shardq_cli
from tests.test_docs import DOCS, OWN_SERVER, PAGES, Block, blocks, run_page
from tests.tls import missing, tls_server

PAGE = "how-to/security.md"
pytestmark = [pytest.mark.skipif(missing() is not None, reason=str(missing())),
              pytest.mark.skipif(shutil.which("psql") is None,
                                 reason="the page's administrator runs psql (apt-get install "
                                        "postgresql-client)")]


def after(everything: list[Block], text: str, lang: str) -> str:
    """The first ``lang`` block after the block that holds ``text``."""
    found = [i for i, b in enumerate(everything) if text in b.text]
    assert found, text
    return next(b.text for b in everything[found[0] + 1:] if b.lang == lang)


def test_the_security_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert PAGE in OWN_SERVER
    everything = blocks((DOCS / PAGE).read_text(encoding="utf-8"), PAGE)
    workdir = tmp_path / "work"
    workdir.mkdir()
    with tls_server(tmp_path / "server") as server:
        with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE app")  # the application's database
        shutil.copy(server.certificates.ca, workdir / "ca.pem")
        host = f"127.0.0.1:{server.pg.port}"
        monkeypatch.setenv("DB_HOST", host)
        monkeypatch.setenv("ADMIN_DSN", server.url("app"))
        monkeypatch.delenv("SHARDQ_DSN", raising=False)
        monkeypatch.chdir(workdir)
        monkeypatch.syspath_prepend(str(workdir))
        try:
            counts = run_page(PAGES[PAGE], workdir)
        finally:
            sys.modules.pop("tasks", None)
        assert counts["shell"] >= 6
        assert counts["python"] == 3
        printed = capsys.readouterr().out
        assert printed.strip() == after(everything, "reader.pause", "text").strip()

        owner = f"postgresql://shardq_owner:owner-secret@{host}/app?sslmode=verify-full" \
            "&sslrootcert=ca.pem"
        grants = shardq_cli("migrate", "--grants", "shardq_worker", "--sql", dsn=owner).stdout
        version = psycopg.connect(server.url("app")).info.server_version
        shown = after(everything, "--grants shardq_worker --sql", "sql")
        if version < 170000:  # the page shows what PostgreSQL 15 and 16 are given
            assert grants.strip() == shown.strip()
        reporting = "postgresql://reporting:reporting-secret@" + host + \
            "/app?sslmode=verify-full&sslrootcert=ca.pem"
        refused = shardq_cli("stats", "--dsn", reporting, check=False)
        assert refused.stderr.strip() == after(everything, "CREATE ROLE reporting",
                                               "text").strip()
