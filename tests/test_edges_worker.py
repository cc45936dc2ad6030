"""The worker's runtime edges: a schema that goes away under it, a target that does not
load, a --queue the app has no task on, what failure lines say, and the noise of a start
(the embedded server's warning, a needless index rebuild)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy.exc

import shardq
from shardq.core import migrate
from shardq.core.config import ClientConfig
from shardq.core.errors import SchemaNotReady
from shardq.core.lograte import FORGET_AFTER, RateLimit
from shardq.core.loop import MAX_BACKOFF_S, Loop
from shardq.loops import periodic
from shardq.loops.vacuum import Vacuumer
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.apps import ticker
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.helpers import scalar, wait_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ticks_db(databases: Databases) -> str:
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ticker.SETUP)
    return url


@pytest.fixture
def daemons() -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def start(env: dict[str, str], *args: str) -> Daemon:
        started.append(Daemon(env, *args))
        return started[-1]

    yield start
    for d in started:
        d.kill()


# -- 3: the schema goes away under a live worker, and comes back -------------------------

def downgrade_under_the_worker(url: str) -> None:
    """``alembic downgrade base`` while the worker runs.  A migration that locks two tables
    can deadlock with a worker's statement on them; PostgreSQL then rolls that one migration
    back (each runs in its own transaction) and running the command again goes on from it."""
    for attempt in range(5):
        try:
            migrate.downgrade(url)
            return
        except sqlalchemy.exc.OperationalError as e:
            if not isinstance(e.orig, psycopg.errors.DeadlockDetected) or attempt == 4:
                raise


def test_a_dropped_schema_is_one_line_and_the_schedules_come_back_with_it(
        ticks_db: str, daemons: Callable[..., Daemon]) -> None:
    env = {**os.environ, "SHARDQ_DSN": ticks_db, "PYTHONPATH": str(ROOT)}
    daemon = daemons(env, "tests.apps.ticker:app", "--claimers", "1", "--concurrency", "2")
    wait_for(lambda: scalar(ticks_db, "SELECT count(*) FROM ticks") > 0, 60,
             what="a first tick")
    dropped_at = len(daemon.lines)
    downgrade_under_the_worker(ticks_db)
    wait_for(lambda: daemon.saw("the shardq schema is missing", dropped_at), 30,
             what="the worker to tell of the missing schema")
    time.sleep(4)  # several retries of every loop while the schema is gone
    outage = daemon.lines[dropped_at:]
    with open(os.devnull, "w") as sink:
        migrate.upgrade(ticks_db, output=sink)
    migrated_at = scalar(ticks_db, "SELECT now()")

    # Before: five tracebacks a second.  Now: one line for the whole process, no traceback.
    assert not any("Traceback" in line for line in outage), "".join(outage)
    missing = [line for line in outage if "the shardq schema is missing" in line]
    assert len(missing) == 1, "".join(outage)
    assert "create or upgrade the schema with `shardq migrate`" in missing[0]
    assert len(outage) <= 4, "".join(outage)

    # The schedule is registered again, listed, and ticks again.
    wait_for(lambda: daemon.saw("periodic schedules registered again: tick", dropped_at), 60,
             what="the schedules to be registered again")
    with shardq.Client(ticks_db) as client:
        listed = periodic.listing(client.statements)
    assert [(s.name, s.removed_at) for s in listed] == [("tick", None)]
    wait_for(lambda: scalar(ticks_db, "SELECT count(*) FROM ticks WHERE ran_at > %s",
                            (migrated_at,)) > 0, 60, what="a tick after the migration")
    wait_for(lambda: daemon.saw("recovered after", dropped_at), 60, what="the recovery line")
    assert daemon.stop() == 0
    assert not any("Traceback" in line for line in daemon.lines), "".join(daemon.lines)


class Flaky(Loop[int]):
    """A step that raises ``error`` ``failures`` times, then succeeds."""

    max_backoff_s = 0.05  # keeps the test quick; the backoff still grows to it

    def __init__(self, name: str, error: Exception, failures: int) -> None:
        super().__init__(name, 0.01)
        self.error, self.left = error, failures
        self.done = threading.Event()

    def run_once(self) -> int:
        if self.left:
            self.left -= 1
            raise self.error
        self.done.set()
        return 0


def run_until_done(*loops: Flaky) -> None:
    for loop in loops:
        loop.start()
    try:
        for loop in loops:
            assert loop.done.wait(30), f"{loop.name} never succeeded"
    finally:
        for loop in loops:
            loop.stop(5)


def test_a_loop_tells_of_a_bug_once_with_its_traceback_then_of_its_recovery(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="shardq"):
        run_until_done(Flaky("edge-bug", RuntimeError("a bug"), 3))
    lines = [r for r in caplog.records if r.getMessage().startswith("edge-bug:")]
    assert [(r.levelname, r.exc_info is not None) for r in lines] == [
        ("ERROR", True), ("WARNING", False)]
    assert lines[0].getMessage().startswith("edge-bug: step failed; retrying in ")
    assert lines[1].getMessage().startswith("edge-bug: recovered after 3 failed step(s) in ")


class MissingSchema(SchemaNotReady):
    """A missing schema of this test's own (the process tells each kind once a minute)."""


def test_an_expected_failure_of_many_loops_is_one_line_without_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    error = MissingSchema("the shardq schema is missing (relation \"shardq.tasks\")")
    loops = [Flaky(f"edge-schema-{i}", error, 3) for i in range(3)]
    with caplog.at_level(logging.INFO, logger="shardq"):
        run_until_done(*loops)
    lines = [r for r in caplog.records if r.getMessage().startswith("edge-schema-")]
    told = [r for r in lines if "the shardq schema is missing" in r.getMessage()]
    assert len(told) == 1
    assert told[0].exc_info is None
    assert "create or upgrade the schema with `shardq migrate`" in told[0].getMessage()
    teller = told[0].getMessage().split(":")[0]
    assert [r.getMessage().split(":")[0] for r in lines if "recovered" in r.getMessage()] == [
        teller]


def test_failing_steps_back_off_exponentially_up_to_the_cap() -> None:
    loop = Flaky("edge-backoff", RuntimeError(), 0)
    loop.interval_s, loop.max_backoff_s = 1.0, MAX_BACKOFF_S
    assert loop.backoff_s(1) == 1.0  # the first retry comes after the usual interval
    for failures, most in ((2, 2.0), (3, 4.0), (4, 8.0), (5, 16.0), (6, 30.0), (50, 30.0)):
        wait = loop.backoff_s(failures)
        assert max(1.0, most / 2) <= wait <= most  # doubling, jittered by up to half
    slow = Flaky("edge-backoff-slow", RuntimeError(), 0)
    slow.interval_s = 60.0  # longer than the cap: a failure never makes it retry sooner
    assert {slow.backoff_s(n) for n in (1, 2, 10)} == {60.0}


# -- 4: a target that does not load is one line ------------------------------------------

BAD_MODULES = {
    "syntax.py": "import shardq\napp = shardq.App()\ndef f(:\n    pass\n",
    "raises.py": "import shardq\napp = shardq.App()\nraise RuntimeError('no config here')\n",
    "needs.py": "import shardq\nimport nosuchdependency\n",
    "tasks.py": ("import shardq\napp = shardq.App()\nLIMIT = 3\n\n"
                 "@app.task(queue='emails')\ndef send(to: str) -> None:\n    pass\n"),
}


@pytest.fixture
def project(tmp_path: Path, db: str) -> tuple[Path, dict[str, str]]:
    for name, text in BAD_MODULES.items():
        (tmp_path / name).write_text(text)
    return tmp_path, {**os.environ, "SHARDQ_DSN": db}


@pytest.mark.parametrize(("args", "line"), [
    (["syntax:app"],
     "shardq: cannot import 'syntax': SyntaxError: invalid syntax (syntax.py, line 3); "
     "`shardq -v consume ...` shows the traceback"),
    (["raises:app"],
     "shardq: cannot import 'raises': RuntimeError: no config here (raises.py, line 3); "
     "`shardq -v consume ...` shows the traceback"),
    (["needs:app"],
     "shardq: cannot import 'needs': ModuleNotFoundError: No module named "
     "'nosuchdependency' (needs.py, line 2); `shardq -v consume ...` shows the traceback"),
    (["nosuchmodule:app"],
     "shardq: cannot import 'nosuchmodule': no module named 'nosuchmodule' in {cwd} or on "
     "the Python path"),
    (["tasks:ap"], "shardq: 'tasks' has no attribute 'ap' (the module's Apps: app)"),
    (["tasks:LIMIT"], "shardq: 'tasks:LIMIT' is an object of type int, neither a shardq.App "
                      "nor a function (the module's Apps: app)"),
    (["tasks:send"], "shardq: 'tasks:send' is a task of an App, not a raw handler: consume "
                     "tasks:app"),
    # 7: every task of a queue the app has no task on would be dead-lettered.
    (["tasks:app", "--queue", "emails", "--queue", "nosuch"],
     "shardq: --queue 'nosuch': tasks:app has no task on that queue (its queues: emails)"),
])
def test_a_target_that_does_not_load_is_one_line_and_exit_2(
        project: tuple[Path, dict[str, str]], args: list[str], line: str) -> None:
    cwd, env = project
    done = subprocess.run([sys.executable, "-m", "shardq", "consume", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line.format(cwd=cwd) + "\n")


def test_verbose_adds_the_traceback_of_an_import(project: tuple[Path, dict[str, str]]) -> None:
    cwd, env = project
    done = subprocess.run([sys.executable, "-m", "shardq", "-v", "consume", "raises:app"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "    raise RuntimeError('no config here')" in lines
    assert lines[-1] == ("shardq: cannot import 'raises': RuntimeError: no config here "
                         "(raises.py, line 3)")


# -- 9: failure lines say what became of the task ----------------------------------------

def test_failure_lines_tell_death_dead_letters_and_retries_apart(
        dsn: str, client: shardq.Client, caplog: pytest.LogCaptureFixture) -> None:
    app = shardq.App(dsn)

    @app.task(queue="fates", max_attempts=3)
    def poisoned() -> None:
        raise shardq.Fail("poison message")

    @app.task(queue="fates", max_attempts=3)
    def picky(n: int) -> None:
        raise TypeError(f"bad input {n}")

    @app.task(queue="fates", max_attempts=1)
    def once() -> None:
        raise RuntimeError("only chance")

    ids = {"poisoned": poisoned.enqueue(), "picky1": picky.enqueue(1),
           "picky2": picky.enqueue(2), "once": once.enqueue(),
           "nope": client.enqueue("fates", {"task": "nope", "args": [], "kwargs": {}})}
    worker = Worker(app, ClientConfig(dsn=dsn, backoff_base_s=0.1, backoff_jitter=0),
                    WorkerConfig(janitors=0, listen=False, poll_max_ms=50))
    with caplog.at_level(logging.WARNING, logger="shardq.worker"):
        worker.start()
        try:
            wait_for(lambda: client.stats("fates")["dead"] == 5, 60, what="five dead tasks")
        finally:
            worker.stop(grace_s=5)
    lines = {r.getMessage() for r in caplog.records}
    assert f"task {ids['poisoned']} (queue fates, attempt 1/3) died: Fail: poison message" \
        in lines
    assert (f"task {ids['nope']} dead-lettered: no handler for task 'nope' on queue 'fates' "
            "in this app") in lines
    assert f"task {ids['once']} (queue fates, attempt 1/1) died: RuntimeError: only chance " \
           "(its last attempt)" in lines
    # Two messages of one error type on one queue: both shown (each its own line).
    for n in (1, 2):
        assert (f"task {ids[f'picky{n}']} (queue fates, attempt 1/3) failed: TypeError: "
                f"bad input {n}; retry in 0.2s") in lines
    assert not any("attempt 1/3 failed" in line or "1/10" in line for line in lines)


def test_rate_limit_lets_a_burst_through_and_forgets_quiet_keys() -> None:
    now = [0.0]
    limit = RateLimit(10, clock=lambda: now[0], burst=2)
    assert [limit.allow("q") for _ in range(4)] == [0, 0, None, None]
    assert limit.allow("r") == 0  # another key has its own budget
    now[0] = 10.0
    assert limit.allow("q") == 2  # the lines held back are counted
    assert limit.allow("q") == 0
    assert limit.allow("q") is None
    now[0] = 10.0 + FORGET_AFTER * 10
    # Held back a minute ago: forgotten, rather than told as if it were recent.
    assert limit.allow("q") == 0


# -- 12: a start without noise -------------------------------------------------------------

def test_the_embedded_server_starts_without_warnings_of_its_internals(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SHARDQ_") and k != "XDG_RUNTIME_DIR"}
    env["SHARDQ_HOME"] = str(tmp_path / "home")
    try:
        done = subprocess.run([sys.executable, "-m", "shardq", "db", "url"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("postgresql://")
        # No RuntimeDirWarning, nor its source line; and the embedded server, being the
        # documented default, is no WARNING either.
        assert done.stderr == ""
        told = subprocess.run([sys.executable, "-m", "shardq", "-v", "db", "url"], env=env,
                              capture_output=True, text=True, timeout=120)
        [line] = [said for said in told.stderr.splitlines() if "no database named" in said]
        assert " INFO shardq: no database named (SHARDQ_DSN); using the embedded " \
               "PostgreSQL with its data in " in line
    finally:
        subprocess.run([sys.executable, "-m", "shardq", "db", "stop"], env=env,
                       capture_output=True, timeout=120)


def live_rows(url: str) -> Any:
    return scalar(url, "SELECT n_live_tup FROM pg_stat_user_tables "
                       "WHERE relid = 'shardq.tasks'::regclass")


def test_a_table_filled_since_its_last_vacuum_is_not_rebuilt_at_every_start(quiet: str) -> None:
    with psycopg.connect(quiet, autocommit=True) as conn:  # never vacuumed nor analyzed
        conn.execute("INSERT INTO shardq.tasks (queue, payload) "
                     "SELECT 'backlog', '{}' FROM generate_series(1, 100000)")
    wait_for(lambda: live_rows(quiet) == 100000, what="the live rows in the statistics")
    with shardq.Client(quiet, reindex_min_bytes=1024 * 1024) as client:
        # Each worker start makes a new step, whose first check is due at once.
        assert [Vacuumer(client).run_once().reindexed for _ in range(2)] == [(), ()]
        with psycopg.connect(quiet, autocommit=True) as conn:  # now the entries are gone
            conn.execute("DELETE FROM shardq.tasks")
            conn.execute("VACUUM shardq.tasks")
        wait_for(lambda: live_rows(quiet) == 0, what="the emptied table in the statistics")
        [rebuilt] = Vacuumer(client).run_once().reindexed
        assert rebuilt.bytes_after < rebuilt.bytes_before / 4
