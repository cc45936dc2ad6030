"""The shardq command line, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import shardq


def shardq_cli(*args: str, env: dict[str, str] | None = None,
               check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shardq", *args], capture_output=True,
                          text=True, timeout=120, check=check,
                          env={**os.environ, **(env or {})})


def test_migrate_then_use(databases: Any) -> None:
    url = databases.create(migrated=False)
    shardq_cli("migrate", "--dsn", url, "--bucket-count", "4")
    with shardq.Client(url) as client:
        assert client.bucket_count == 4
        task_id = client.enqueue("cli", {"n": 1})
    stats = json.loads(shardq_cli("stats", "cli", env={"SHARDQ_DSN": url}).stdout)
    assert stats["available"] == 1
    shown = shardq_cli("task", "show", str(task_id), "--dsn", url).stdout
    assert "available" in shown and "times_claimed: 0" in shown


def test_migrate_sql_prints_ddl_without_a_database() -> None:
    out = shardq_cli("migrate", "--sql", "--dialect", "postgresql").stdout
    assert "CREATE TABLE IF NOT EXISTS shardq.tasks" in out


def test_janitor_once(dsn: str, client: shardq.Client) -> None:
    client.enqueue("j", {})
    [task] = [t for b in range(client.bucket_count) for t in client.claim_bucket("j", b,
                                                                               lease_s=0.001)]
    report = json.loads(shardq_cli("janitor", "--once", "--dsn", dsn).stdout)
    assert report == {"rescued": 1, "dead": 0, "promoted": 0, "purged": 0}
    assert client.get(task.id) is not None


def test_errors_are_one_line(databases: Any) -> None:
    url = databases.create(migrated=False)
    result = shardq_cli("stats", "q", "--dsn", url, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("shardq: the table shardq.tasks does not exist")
    assert "Traceback" not in result.stderr
    shown = shardq_cli("task", "show", "00000000-0000-0000-0000-000000000000", "--dsn", url,
                       check=False)
    assert shown.returncode == 2


def test_unknown_task(dsn: str) -> None:
    result = shardq_cli("task", "show", "00000000-0000-0000-0000-000000000000", "--dsn", dsn,
                        check=False)
    assert result.returncode == 1 and "no task" in result.stderr


def test_flags_and_env_come_from_the_config(dsn: str) -> None:
    help_text = shardq_cli("janitor", "--help").stdout
    for flag in ("--dsn", "--lease-s", "--max-attempts", "--backoff-base-s", "--janitor-batch"):
        assert flag in help_text
    assert "SHARDQ_LEASE_S" in help_text
