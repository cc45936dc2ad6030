"""The command line's edges, run as a user would: settings' ranges and sources, one-line
errors where a traceback used to be, the dashboard's port and signals, short help, and
the words the commands and the web dashboard print."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest

import shardq
from shardq.core import migrate
from shardq.core.config import ClientConfig, check_settings, load, setting
from shardq.loops import periodic
from shardq.loops.periodic import Schedule
from shardq.maths.cadence import Cadence
from shardq.ops.history import Minute
from shardq.web import DashboardConfig, create_app
from shardq.web.chart import svg
from shardq.worker.config import WorkerConfig
from tests.helpers import claim_all, free_port, one_line_error, wait_for
from tests.web import call, serving

UNUSABLE_HOME = "/proc/nope"  # no directory can be made there, not even by root


def run(*args: str, env: dict[str, str] | None = None,
        stdout: int | IO[Any] = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """``shardq ARGS`` without the caller's SHARDQ_DSN, with ``env`` added."""
    base = {k: v for k, v in os.environ.items() if k != "SHARDQ_DSN"}
    return subprocess.run([sys.executable, "-m", "shardq", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120, check=False,
                          env={**base, **(env or {})})


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- 1: every number has a range -------------------------------------------------------

@pytest.mark.parametrize(("args", "env"), [
    (["--periodic-interval-s", "0"], {}),
    (["--periodic-interval-s", "-1"], {}),
    (["--periodic-interval-s", "99999999999999999999"], {}),
    ([], {"SHARDQ_PERIODIC_INTERVAL_S": "-1"}),
], ids=["zero", "negative", "huge", "env"])
def test_periodic_interval_has_a_range(args: list[str], env: dict[str, str]) -> None:
    one_line_error(run("consume", "nosuch:app", *args, env=env),
                   "periodic_interval_s", "between 0.1 and 60")


def test_periodic_interval_within_its_range_is_taken() -> None:
    config = load(WorkerConfig, environ={"SHARDQ_PERIODIC_INTERVAL_S": "60"})
    assert config.periodic_interval_s == 60.0


def test_every_numeric_setting_has_a_range() -> None:
    for cls in (ClientConfig, WorkerConfig, DashboardConfig):
        unbounded = [f.name for f in dataclasses.fields(cls)
                     if str(f.type).startswith(("int", "float"))
                     and (f.metadata["low"] is None or f.metadata["high"] is None)]
        assert unbounded == [], cls.__name__

    @dataclasses.dataclass(frozen=True)
    class Careless:
        interval_s: float = setting(1.0, "a number nobody bounded")

        def __post_init__(self) -> None:
            check_settings(self)

    with pytest.raises(TypeError, match="interval_s is a number without a range"):
        Careless()


# -- 2, 5 and 11: the dashboard's address, a port in use, and its signals ---------------

@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_dashboard_listens_where_the_environment_says_and_stops_with_0(
        dsn: str, stop: signal.Signals) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shardq", "dashboard", "--dsn", dsn],
        stderr=subprocess.PIPE, text=True,
        env={**os.environ, "SHARDQ_PORT": str(port), "SHARDQ_HOST": "127.0.0.1"})
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(f"{url}/api/queues"), timeout=30, what="the dashboard")
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert err.splitlines() == [f"shardq dashboard on {url}/ (read-only: no --token-file "
                                "given)"]


def _answers(url: str) -> bool:
    try:
        return call(url).status == 200
    except OSError:
        return False


def test_dashboard_on_a_port_in_use_is_one_line(dsn: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("dashboard", "--dsn", dsn, "--port", str(port))
    one_line_error(result, f"port {port} on 127.0.0.1 is in use")
    assert "shardq dashboard on" not in result.stderr


# -- 4: one line instead of a traceback --------------------------------------------------

def test_an_unusable_home_is_one_line() -> None:
    one_line_error(run("stats", env={"SHARDQ_HOME": UNUSABLE_HOME}),
                   UNUSABLE_HOME, "SHARDQ_HOME")


def test_a_closed_pipe_ends_the_output_quietly() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` once it has had enough: nobody reads any more
    with os.fdopen(write_end, "w") as pipe:
        result = run("migrate", "--sql", "--dialect", "postgresql", stdout=pipe)
    assert (result.returncode, result.stderr) == (141, "")


# -- 10: periodic schedules by their function's name ---------------------------------

def test_periodic_run_finds_a_schedule_by_its_last_part(databases: Any) -> None:
    url = databases.create()
    every = Cadence(every_s=60)
    schedules = [Schedule(name, every, "ticks") for name in
                 ("jobs.nightly", "tasks.tick", "other.tick")]
    with shardq.Client(url) as client:
        periodic.register(client.statements, schedules, ("ticks",))
    fired = run("periodic", "run", "nightly", "--dsn", url)
    assert fired.returncode == 0, fired.stderr
    one_line_error(run("periodic", "run", "tick", "--dsn", url),
                   "2 periodic schedules end in 'tick'",
                   "give the full name, one of other.tick, tasks.tick")
    for name in ("ick", "nope"):  # the last part is what follows a dot, whole
        one_line_error(run("periodic", "run", name, "--dsn", url),
                       f"no periodic schedule named {name!r}")
    exact = run("periodic", "run", "tasks.tick", "--dsn", url)
    assert exact.returncode == 0, exact.stderr
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, payload->>'task' FROM shardq.tasks").fetchall()
    assert sorted((str(i), t) for i, t in rows) == sorted(
        [(fired.stdout.strip(), "jobs.nightly"), (exact.stdout.strip(), "tasks.tick")])


# -- 11: messages -------------------------------------------------------------------------

@pytest.mark.parametrize(("dsn", "scheme"), [("mysql://app@db/shop", "mysql"),
                                             ("http://example.org/", "http")])
def test_an_unsupported_scheme_is_named(dsn: str, scheme: str) -> None:
    for result in (run("stats", "--dsn", dsn), run("stats", env={"SHARDQ_DSN": dsn})):
        one_line_error(result, f"unsupported scheme {scheme!r}", "postgresql://")
        assert 'missing "="' not in result.stderr


@pytest.mark.parametrize("dsn", ["postgresql://u@h/db", "postgres://u@h/db",
                                 "cockroachdb://root@h:26257/db", "host=/tmp dbname=x",
                                 "host=h password=a://b"])
def test_the_supported_dsn_forms_are_accepted(dsn: str) -> None:
    assert ClientConfig(dsn=dsn).dsn == dsn


def test_a_dsn_neither_url_nor_key_value_is_refused_without_echoing_it() -> None:
    with pytest.raises(shardq.ConfigError, match="neither a URL") as caught:
        ClientConfig(dsn="app:s3cret@db")
    assert "s3cret" not in str(caught.value)


def test_an_empty_dsn_is_not_the_embedded_database() -> None:
    # With an unusable home, falling back to the embedded database would fail differently.
    home = {"SHARDQ_HOME": UNUSABLE_HOME}
    for result in (run("stats", "--dsn", "", env=home),
                   run("stats", env={**home, "SHARDQ_DSN": ""})):
        one_line_error(result, "dsn", "is empty", "leave it unset")
    with pytest.raises(shardq.ConfigError, match="leave it unset"):
        shardq.Client("")


def test_an_empty_variable_is_a_value() -> None:
    with pytest.raises(shardq.ConfigError, match="SHARDQ_LEASE_S='' is not a valid float"):
        load(ClientConfig, environ={"SHARDQ_LEASE_S": ""})


def test_a_priority_out_of_range_says_the_range(client: shardq.Client) -> None:
    queue = fresh("priority")
    with pytest.raises(shardq.InvalidTask, match="-2,147,483,647 to 2,147,483,647"):
        client.enqueue(queue, {}, priority=2**40)
    assert client.stats(queue)["available"] == 0


def test_dead_purge_needs_yes(client: shardq.Client, dsn: str) -> None:
    queue = fresh("doomed")
    client.enqueue(queue, {})
    [task] = claim_all(client, queue)
    client.nack(task, "ValueError: bad", dead=True)
    refused = run("dead", "purge", queue, "--dsn", dsn)
    assert refused.returncode == 2
    assert "add --yes" in refused.stderr
    assert client.stats(queue)["dead"] == 1
    done = run("dead", "purge", queue, "--yes", "--dsn", dsn)
    assert done.stdout.strip() == "purged 1 task(s)"
    assert client.stats(queue)["dead"] == 0


def test_task_show_prints_the_state_once(client: shardq.Client, dsn: str) -> None:
    task_id = client.enqueue(fresh("shown"), {}, delay_s=60)
    shown = run("task", "show", str(task_id), "--dsn", dsn).stdout
    fields = dict(line.strip().split(": ", 1) for line in shown.splitlines())
    assert fields["state"] == "scheduled"
    assert "status" not in fields


# -- 12: help, migrate and demo say what matters -----------------------------------------

def test_help_is_written_for_users() -> None:
    top = run("--help").stdout
    assert "``" not in top
    assert "shardq demo" in top


def test_a_commands_help_is_short_and_help_all_has_the_rest() -> None:
    short = run("stats", "--help").stdout
    assert [flag for flag in ("--dsn", "--help-all", "--vacuum-dead-rows", "--pool-max-size")
            if flag in short] == ["--dsn", "--help-all"]
    assert len(short.splitlines()) < 40
    full = run("stats", "--help-all").stdout
    for flag in ("--vacuum-dead-rows", "SHARDQ_VACUUM_DEAD_ROWS", "--pool-max-size",
                 "--janitor-batch"):
        assert flag in full
    worker = run("consume", "--help").stdout
    assert [flag for flag in ("--concurrency", "--ack-flush-ms") if flag in worker] == [
        "--concurrency"]
    assert "--ack-flush-ms" in run("consume", "--help-all").stdout


def test_hidden_flags_still_work() -> None:
    one_line_error(run("consume", "nosuch:app", "--ack-flush-ms", "0"), "ack_flush_ms")


def test_migrate_says_what_it_did(databases: Any) -> None:
    url = databases.create(migrated=False)
    head = migrate.head()
    said = [run("migrate", "--dsn", url, *args).stdout.strip()
            for args in (["--revision", "0010"], [], [])]
    assert said == ["schema created at revision 0010",
                    f"schema upgraded from revision 0010 to {head} (head)",
                    f"schema already at revision {head} (head)"]


def test_demo_says_what_it_left_running(tmp_path: Path, dsn: str) -> None:
    home = {"SHARDQ_HOME": str(tmp_path)}
    try:
        demo = run("demo", "--tasks", "10", env=home)
        assert demo.returncode == 0, demo.stderr
        assert demo.stdout.splitlines()[-1] == (
            f"the embedded PostgreSQL keeps running, its data in {tmp_path / 'pg18'}; "
            "`shardq db stop` stops it")
    finally:
        assert run("db", "stop", env=home).stdout.strip() == "stopped"
    named = run("demo", "--tasks", "10", "--dsn", dsn).stdout
    assert "embedded" not in named


# -- 13: the web dashboard's words ---------------------------------------------------------

def test_dashboard_says_locked_active_and_what_drain_eta_means(client: shardq.Client) -> None:
    busy, idle = fresh("busy"), fresh("idle")
    client.enqueue_many(busy, [{}, {}])
    claim_all(client, busy, most=1)
    client.enqueue(idle, {})
    client.pause(idle)
    with serving(create_app(client)) as url:
        home = call(f"{url}/").text
        page = call(f"{url}/queues/{busy}").text
    head = home[home.index("<thead>"):home.index("</thead>")]
    assert ">locked<" in head
    assert ">running<" not in head
    assert "not draining" in home  # the legend under the table
    assert re.search(r'<th class="n" title="[^"]*not draining[^"]*">drain ETA</th>', head)
    states = dict(re.findall(r'<tr data-queue="([^"]+)">.*?<td>(?:<span[^>]*>)?(\w+)'
                             r'(?:</span>)?</td>\s*</tr>', home, re.S))
    assert (states[busy], states[idle]) == ("active", "paused")
    assert 'locked <b data-field="locked">1</b>' in page
    assert '<span data-field="paused">active</span>' in page
    assert "running" not in page.replace("running now", "")


def _ticks(picture: str) -> list[str]:
    return re.findall(r'font-size="11">([^<]+/(?:s|min))</text>', picture)


def test_a_slow_queues_chart_counts_per_minute_on_round_ticks() -> None:
    now = datetime(2030, 1, 1, 12, 0, 30, tzinfo=UTC)
    start = now.replace(second=0) - timedelta(minutes=3)
    slow = [Minute(start + timedelta(minutes=i), n, n) for i, n in enumerate([0, 3, 1, 0])]
    picture = svg(slow, now)
    assert _ticks(picture) == ["0/min", "2.5/min", "5/min"]
    assert "— enqueued/min" in picture
    fast = [Minute(start + timedelta(minutes=i), n, 0) for i, n in enumerate([0, 90, 0, 0])]
    assert _ticks(svg(fast, now)) == ["0/s", "1/s", "2/s"]
