"""The embedded default: no DSN starts a local PostgreSQL, applies the schema, keeps the data."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT_ENQUEUE = """
import logging
import shardq
logging.basicConfig(level=logging.INFO)  # the fallback is said at INFO: it is the default
with shardq.Client() as c:
    print(c.enqueue("kept", {"survives": "restart"}))
"""

SCRIPT_CLAIM = """
import shardq
with shardq.Client() as c:
    print([t.payload for t in c.claim("kept", limit=10)])
"""


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDQ_")}
    env["SHARDQ_HOME"] = str(tmp_path / "home")
    yield env
    subprocess.run([sys.executable, "-m", "shardq", "db", "stop"], env=env, capture_output=True)


def test_client_without_dsn_uses_embedded_postgres(home: dict[str, str]) -> None:
    first = run([sys.executable, "-c", SCRIPT_ENQUEUE], home)
    assert "using the embedded PostgreSQL" in first.stderr
    assert str(Path(home["SHARDQ_HOME"]).resolve() / "pg18") in first.stderr
    url = run([sys.executable, "-m", "shardq", "db", "url"], home).stdout.strip()
    assert url.startswith("postgresql://")

    assert run([sys.executable, "-m", "shardq", "db", "stop"], home).stdout.strip() == "stopped"
    assert run([sys.executable, "-m", "shardq", "db", "stop"], home).stdout.strip() == \
        "not running"

    again = run([sys.executable, "-c", SCRIPT_CLAIM], home)  # starts it again
    assert "{'survives': 'restart'}" in again.stdout


def test_cli_demo_runs_on_the_embedded_default(home: dict[str, str]) -> None:
    out = run([sys.executable, "-m", "shardq", "demo", "--tasks", "2000", "--threads", "2"],
              home).stdout
    assert "enqueued           2,000 tasks" in out
    assert "claimed and acked  2,000 tasks" in out
