"""The shardq command line, run as a user would."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import psycopg
import pytest

import shardq
from tests.helpers import claim_all, one_line_error, shardq_cli, wait_for


def test_migrate_then_use(databases: Any) -> None:
    url = databases.create(migrated=False)
    shardq_cli("migrate", "--dsn", url, "--bucket-count", "4")
    with shardq.Client(url) as client:
        assert client.bucket_count == 4
        task_id = client.enqueue("cli", {"n": 1})
    stats = json.loads(shardq_cli("stats", "cli", "--json", env={"SHARDQ_DSN": url}).stdout)
    assert stats["available"] == 1
    shown = shardq_cli("task", "show", str(task_id), "--dsn", url).stdout
    assert "available" in shown
    assert "times_claimed: 0" in shown


def test_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    done = shardq_cli("--version")
    assert (done.stdout, done.stderr) == (f"shardq {version('shardq')}\n", "")


def test_demo_prints_its_figures_as_aligned_lines(databases: Any) -> None:
    url = databases.create()
    lines = shardq_cli("demo", "--tasks", "50", "--threads", "2", "--dsn", url
                       ).stdout.splitlines()
    assert "{" not in "\n".join(lines)
    assert [line[:19] for line in lines] == ["enqueued           ", "claimed and acked  ",
                                             "left in demo       "]
    assert lines[0].startswith("enqueued           50 tasks in ")
    assert lines[1].startswith("claimed and acked  50 tasks in ")
    assert lines[2] == "left in demo       0 waiting, 0 scheduled, 0 running, 0 dead"


def test_migrate_sql_prints_ddl_without_a_database() -> None:
    out = shardq_cli("migrate", "--sql", "--dialect", "postgresql").stdout
    assert "CREATE TABLE IF NOT EXISTS shardq.tasks" in out


def test_janitor_once(dsn: str, client: shardq.Client) -> None:
    client.enqueue("j", {})
    [task] = claim_all(client, "j", lease_s=0.001)
    report = json.loads(shardq_cli("janitor", "--once", "--dsn", dsn).stdout)
    flows = ("flow_events", "flow_released", "flow_cancelled", "flows_finished",
             "expired_flows", "expired_events", "expired_audit", "expired_sessions",
             "pauses_ended")
    # What it did to flows, durable tasks' events and pauses is reported too (other
    # tests' in the shared database may have left events to fold in, or to delete, and
    # pauses that ended).
    assert set(flows) <= set(report)
    assert {k: v for k, v in report.items() if k not in flows} == {
        "rescued": 1, "dead": 0, "promoted": 0, "purged": 0, "expired_results": 0,
        "expired_attempts": 0, "stale_workers": 0}
    assert client.get(task.id) is not None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_the_janitor_daemon_stops_gracefully_on_a_signal(sig: signal.Signals, dsn: str,
                                                         client: shardq.Client) -> None:
    """SIGTERM (a service manager's) and SIGINT end ``shardq janitor`` with status 0, by its
    own handlers: a SIGINT its parent set to be ignored still counts."""
    queue = f"janitor-{sig.name}"
    client.enqueue(queue, {})
    claim_all(client, queue, lease_s=0.001)
    janitor = subprocess.Popen(
        [sys.executable, "-m", "shardq", "janitor", "--dsn", dsn,
         "--janitor-interval-s", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    def put_back() -> bool:  # running: it put the task back
        assert janitor.poll() is None, janitor.communicate()
        return bool(client.stats(queue)["available"])

    try:
        wait_for(put_back, 60, what="the janitor to put the task back")
        janitor.send_signal(sig)
        out, err = janitor.communicate(timeout=30)
    finally:
        janitor.kill()
    assert (janitor.returncode, out) == (0, ""), err
    assert "Traceback" not in err


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
    assert result.returncode == 1
    assert "no task" in result.stderr


def test_flags_and_env_come_from_the_config(dsn: str) -> None:
    help_text = shardq_cli("janitor", "--help-all").stdout
    for flag in ("--dsn", "--lease-s", "--max-attempts", "--backoff-base-s", "--janitor-batch"):
        assert flag in help_text
    assert "SHARDQ_LEASE_S" in help_text


BAD_COMMANDS: list[tuple[list[str], dict[str, str], tuple[str, ...]]] = [
    (["demo", "--limit", "0"], {}, ("--limit",)),
    (["demo", "--tasks", "-5"], {}, ("--tasks",)),
    (["demo", "--threads", "many"], {}, ("--threads",)),
    (["migrate", "--sql"], {}, ("--dialect",)),
    (["migrate", "--sql", "--dialect", "postgresql", "--revision", "nosuch"], {}, ("nosuch",)),
    (["consume", "nosuch:app", "--metrics-port", "99999"], {}, ("metrics_port",)),
    (["janitor", "--janitor-interval-s", "0"], {}, ("janitor_interval_s",)),
    (["janitor", "--janitor-interval-s", "-1"], {}, ("janitor_interval_s",)),
    (["janitor", "--janitor-interval-s", "nan"], {}, ("janitor_interval_s",)),
    (["janitor", "--lease-s", "nan"], {}, ("lease_s",)),
    (["janitor", "--lease-s", "1e12"], {}, ("lease_s",)),
    (["janitor", "--lease-s", "soon"], {}, ("--lease-s",)),
    (["janitor"], {"SHARDQ_NOTIFY": "maybe"}, ("SHARDQ_NOTIFY",)),
    (["janitor"], {"SHARDQ_BACKOFF_CAP_S": "inf"}, ("SHARDQ_BACKOFF_CAP_S",)),
]


@pytest.mark.parametrize(("args", "env", "words"), BAD_COMMANDS,
                         ids=[" ".join(a) + "".join(e) for a, e, _ in BAD_COMMANDS])
def test_bad_commands_are_one_line(args: list[str], env: dict[str, str],
                                   words: tuple[str, ...]) -> None:
    one_line_error(shardq_cli(*args, env=env, check=False), *words)


def test_dead_retry_refuses_a_bad_id(dsn: str) -> None:
    one_line_error(shardq_cli("dead", "retry", "not-a-uuid", "--dsn", dsn, check=False),
                   "not a task id")


def test_migrate_to_an_unknown_revision(databases: Any) -> None:
    url = databases.create(migrated=False)
    one_line_error(shardq_cli("migrate", "--dsn", url, "--revision", "nosuch", check=False),
                   "nosuch")


def test_task_show_prints_json_and_no_passwords(dsn: str, client: shardq.Client,
                                                connect: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("shown", {"to": "ada", "n": [1, None, True]})
    # An error stored before redaction existed (or by another writer) is masked on display.
    connect.execute("UPDATE shardq.tasks SET last_error = %s, status = 'dead'",
                    ("cannot reach postgresql://app:s3cret@db/x",))
    shown = shardq_cli("task", "show", str(task_id), "--dsn", dsn).stdout
    [payload] = [line.split(": ", 1)[1] for line in shown.splitlines()
                 if line.strip().startswith("payload:")]
    assert json.loads(payload) == {"to": "ada", "n": [1, None, True]}
    listed = shardq_cli("dead", "list", "shown", "--dsn", dsn).stdout
    for out in (shown, listed):
        assert "postgresql://app:***@db/x" in out
        assert "s3cret" not in out
