"""shardq.contrib.django: Django's Tasks API over shardq, in a real project.

tests/django/project is run, as subprocesses, with each Django flavour: Django 5.2 with
the django-tasks backport (this venv's Python), and Django 6's ``django.tasks`` (Python
3.12, the venv .venv-django6 that .ci/run makes).  Each run migrates a fresh database
with ``manage.py shardq_migrate``, enqueues through the Tasks API, runs ``manage.py
shardq_worker`` until the results are there, and reads them through ``get_result`` and
``aget_result``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import shardq
from shardq.core import migrate
from tests.conftest import ROOT, Databases

PROJECT = Path(__file__).resolve().parent / "django" / "project"
DJANGO6_PYTHON = ROOT / ".venv-django6" / "bin" / "python"
BACKPORT, DJANGO6 = "django-5.2-backport", "django-6"
TIMEOUT_S = 120  # of one subprocess: far above what one takes


def interpreter(flavour: str) -> str:
    """The Python that runs ``flavour``, or skip the test (with what would provide it)."""
    if flavour == BACKPORT:
        if not (importlib.util.find_spec("django") and importlib.util.find_spec("django_tasks")):
            pytest.skip("Django 5.2 and django-tasks are not installed in this venv "
                        "(pip install -e '.[django]')")
        return sys.executable
    version = subprocess.run(
        [str(DJANGO6_PYTHON), "-c", "import django, shardq; print(django.VERSION[0])"],
        capture_output=True, text=True, check=False) if DJANGO6_PYTHON.exists() else None
    if version is None or version.returncode != 0 or int(version.stdout) < 6:
        pytest.skip(f"no Python 3.12 venv with Django 6 and shardq at {DJANGO6_PYTHON} "
                    "(.ci/run makes it)")
    return str(DJANGO6_PYTHON)


def project_env(url: str) -> dict[str, str]:
    """The environment of the project's processes: its database's DB_* variables (the
    backend builds its DSN from DATABASES), and no SHARDQ_* settings of the caller's."""
    params = conninfo_to_dict(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDQ_")}
    env.update(DB_NAME=str(params["dbname"]), DB_USER=str(params.get("user", "")),
               DB_PASSWORD=str(params.get("password", "")), DB_HOST=str(params.get("host", "")),
               DB_PORT=str(params.get("port", "")))
    return env


def manage(python: str, env: dict[str, str], *args: str) -> str:
    """``manage.py args`` in the project; its stdout, once it exited 0."""
    done = subprocess.run([python, "manage.py", *args], cwd=PROJECT, env=env, text=True,
                          capture_output=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@contextlib.contextmanager
def running_worker(python: str, env: dict[str, str], *flags: str) -> Iterator[list[str]]:
    """``manage.py shardq_worker flags`` running for the block; the list it yields holds
    the worker's output lines once the block ends and the worker stopped (cleanly)."""
    lines: list[str] = []
    with tempfile.TemporaryFile("w+") as log:
        worker = subprocess.Popen([python, "manage.py", "shardq_worker", *flags], cwd=PROJECT,
                                  env=env, text=True, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield lines
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(TIMEOUT_S)
            log.seek(0)
            lines.extend(log.read().splitlines())
    assert worker.returncode == 0, "\n".join(lines)


@pytest.mark.parametrize("flavour", [BACKPORT, DJANGO6])
def test_tasks_run_and_results_read_back(flavour: str, databases: Databases) -> None:
    python = interpreter(flavour)
    url = databases.create(migrated=False)
    env = project_env(url)
    assert "schema created at revision" in manage(python, env, "shardq_migrate")
    ids: dict[str, str] = json.loads(manage(python, env, "tasks_demo", "enqueue"))
    finishing = [ids[name] for name in ("add", "report", "whoami", "shout", "committed")]
    # Django 6's worker runs in two processes (each sets Django up afresh).  Under
    # DEBUG = True Django's logging writes its own lines (django.tasks) to the console.
    processes = ["--processes", "2"] if flavour == DJANGO6 else []
    with running_worker(python, {**env, "DJANGO_DEBUG": "1"}, "--concurrency", "2",
                        *processes) as output:
        waited = json.loads(manage(python, env, "tasks_demo", "wait", *finishing,
                                   "--failed", ids["flaky"]))
    # Each log record is one line: the task `add` started, then succeeded.
    add_lines = [line for line in output if f"id={ids['add']} " in line]
    assert len(add_lines) == 2, output
    assert "state=SUCCESSFUL" in add_lines[1]

    # flaky's first attempt failed and put its retry an hour off.  With the backport,
    # it is brought forward for another worker process to run (results are read the
    # same way with both flavours: once is enough).
    if flavour == BACKPORT:
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE shardq.tasks SET exec_time = now() WHERE id = %s",
                         [ids["flaky"]])
        with running_worker(python, env, "--queue", "default"):
            manage(python, env, "tasks_demo", "wait", ids["flaky"])
    read = json.loads(manage(python, env, "tasks_demo", "read", *ids.values()))
    # aget_result agrees with get_result
    assert {i: read[i] for i in finishing} == {i: waited[i] for i in finishing}

    added = waited[ids["add"]]
    assert (added["status"], added["value"], added["args"]) == ("SUCCESSFUL", 5, [2, 3])
    assert (added["task"], added["queue"], added["attempts"]) == ("jobs.tasks.add", "default", 1)
    assert added["finished"]
    committed = waited[ids["committed"]]
    assert (committed["status"], committed["value"]) == ("SUCCESSFUL", 30)
    assert committed["kwargs"] == {"a": 10, "b": 20}
    assert waited[ids["shout"]]["value"] == "HI"
    # A task that takes its context sees its own id and attempt.
    assert waited[ids["whoami"]]["value"] == {"tag": "ctx", "id": ids["whoami"], "attempt": 1}

    failed = waited[ids["report"]]
    assert (failed["status"], failed["value"], failed["attempts"]) == ("FAILED", None, 2)
    assert (failed["queue"], failed["priority"]) == ("reports", 50)
    [error] = failed["errors"]
    assert error["class"] == "jobs.tasks.ReportFailed"
    assert "no data for sales" in error["traceback"]

    # Each attempt names the worker that ran it, as shardq.attempts records it: with the
    # backport, flaky's two attempts ran in two worker processes.
    with shardq.Client(url) as client:
        ran = {name: [f"{a.worker_host}:{a.worker_pid}" for a in client.attempts(ids[name])]
               for name in ("flaky", "report")}
    flaky = read[ids["flaky"]]
    assert flaky["worker_ids"] == ran["flaky"]
    if flavour == BACKPORT:
        assert (flaky["status"], flaky["value"], flaky["attempts"]) == ("SUCCESSFUL", 2, 2)
        assert len(set(ran["flaky"])) == 2
    else:
        assert (flaky["status"], flaky["attempts"], len(flaky["errors"])) == ("READY", 1, 1)
    assert failed["worker_ids"] == ran["report"]
    assert all(ran["report"])

    later = read[ids["later"]]
    assert (later["status"], later["priority"], later["finished"]) == ("READY", 100, False)
    assert read[ids["rolled_back"]] is None  # its transaction rolled back: no such task

    # shardq's own rows: Django's priority p is (p + 100) * 36 s of head start, and
    # run_after the task's not-before time.
    with shardq.Client(url) as client:
        scheduled, dead = client.get(ids["later"]), client.get(ids["report"])
    assert scheduled is not None
    assert dead is not None
    assert scheduled.priority == 200 * 36
    assert dead.priority == 150 * 36
    assert scheduled.exec_time == datetime.fromisoformat(later["run_after"])
    assert (scheduled.queue, dead.state) == ("default", "dead")


def test_calls_refused_before_anything_is_written(databases: Databases) -> None:
    python = interpreter(BACKPORT)
    url = databases.create()
    refused = json.loads(manage(python, project_env(url), "tasks_demo", "refuse"))
    assert refused == {"bad_arguments": "TypeError", "not_json": "TypeError",
                       "bad_queue": "InvalidTaskError", "bad_priority": "InvalidTaskError",
                       "unknown_id": "TaskResultDoesNotExist",
                       "not_an_id": "TaskResultDoesNotExist"}
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM shardq.tasks").fetchone() == (0,)


def test_worker_refuses_a_queue_the_backend_does_not_allow(databases: Databases) -> None:
    python = interpreter(BACKPORT)
    done = subprocess.run([python, "manage.py", "shardq_worker", "--queue", "nightly"],
                          cwd=PROJECT, env=project_env(databases.create()), text=True,
                          capture_output=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 1
    assert "--queue 'nightly' is not one of TASKS['default']'s QUEUES (default, reports)" in (
        done.stderr)


def test_database_alias_must_be_postgresql() -> None:
    python = interpreter(BACKPORT)
    script = (
        "import django\n"
        "from django.conf import settings\n"
        "settings.configure(DATABASES={'default': {'ENGINE': 'django.db.backends.sqlite3', "
        "'NAME': ':memory:'}})\n"
        "django.setup()\n"
        "from shardq.contrib.django.options import database_dsn\n"
        "database_dsn('default', \"TASKS['default']\")\n")
    done = subprocess.run([python, "-c", script], text=True, capture_output=True,
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode == 1
    assert ("Misconfigured: TASKS['default'] keeps its queue in DATABASES['default'] "
            "(OPTIONS['DATABASE']), which is sqlite, not PostgreSQL: point OPTIONS['DATABASE'] "
            "at a PostgreSQL alias" in done.stderr)


# A project whose TASKS has one shardq backend per misconfiguration (and one that is
# right, on DATABASES["default"]), checked by `manage.py check ARGS`.
CHECKED_PROJECT = """
import sys
import django
from django.conf import settings
from django.core.management import execute_from_command_line

apps = ["shardq.contrib.django"] + (["django_tasks"] if django.VERSION < (6, 0) else [])
backend = "shardq.contrib.django.ShardqBackend"
settings.configure(
    INSTALLED_APPS=apps,
    DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", **DEFAULT},
               "lite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
               "away": {"ENGINE": "django.db.backends.postgresql", "NAME": "shop",
                        "HOST": "127.0.0.1", "PORT": 1}},
    TASKS={
        "default": {"BACKEND": backend, "QUEUES": ["default"]},
        "sqlite": {"BACKEND": backend, "OPTIONS": {"DATABASE": "lite"}},
        "missing": {"BACKEND": backend, "OPTIONS": {"DATABASE": "queues"}},
        "settings": {"BACKEND": backend, "OPTIONS": {"SETTINGS": {"max_attempts": "lots"}}},
        "mysql": {"BACKEND": backend, "OPTIONS": {"DSN": "mysql://app@db/shop"}},
        "options": {"BACKEND": backend, "OPTIONS": {"DNS": "postgresql://db/shop"}},
        "queues": {"BACKEND": backend, "QUEUES": ["default", "two words"]},
        "down": {"BACKEND": backend, "OPTIONS": {"DATABASE": "away"}},
        "elsewhere": {"BACKEND": backend, "OPTIONS": {"DSN": "postgresql://127.0.0.1:1/shop"}},
    })
execute_from_command_line(["manage.py", "check", *sys.argv[1:]])
"""


def check(python: str, url: str, *args: str) -> dict[str, list[str]]:
    """The messages of ``manage.py check args`` in :data:`CHECKED_PROJECT` (its
    DATABASES["default"] at ``url``), by id: each its line, then its hint's."""
    params = conninfo_to_dict(url)
    default = {"NAME": params["dbname"], "USER": params.get("user", ""),
               "PASSWORD": params.get("password", ""), "HOST": params.get("host", ""),
               "PORT": params.get("port", "")}
    script = CHECKED_PROJECT.replace("**DEFAULT", f"**{default!r}")
    done = subprocess.run([python, "-c", script, *args], text=True, capture_output=True,
                          timeout=TIMEOUT_S, check=False, env=project_env(url))
    lines = (done.stdout + done.stderr).splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    found: dict[str, list[str]] = {}
    for line, following in zip(lines, [*lines[1:], ""], strict=True):
        if line.startswith("?: (shardq."):
            check_id = line.split("(", 1)[1].split(")", 1)[0]
            assert check_id not in found, lines  # each problem is reported once
            found[check_id] = [line.split(") ", 1)[1], following.strip()]
    return found


@pytest.mark.parametrize("flavour", [BACKPORT, DJANGO6])
def test_check_reports_each_misconfiguration_without_a_database(
        flavour: str, databases: Databases) -> None:
    python = interpreter(flavour)
    found = check(python, databases.create(migrated=False))
    assert found == {
        "shardq.E001": ["TASKS['options']['OPTIONS'] has unknown key 'DNS'",
                        "HINT: OPTIONS takes DSN, DATABASE, SETTINGS, KEEP_RESULT_S, "
                        "PRIORITY_STEP_S (see shardq's Django guide)"],
        "shardq.E002": ["TASKS['missing'] keeps its queue in DATABASES['queues'] "
                        "(OPTIONS['DATABASE']), which does not exist",
                        "HINT: set OPTIONS['DATABASE'] to one of 'default', 'lite', 'away', or "
                        "give the queue's database as OPTIONS['DSN']"],
        "shardq.E003": ["TASKS['sqlite'] keeps its queue in DATABASES['lite'] "
                        "(OPTIONS['DATABASE']), which is sqlite, not PostgreSQL",
                        "HINT: point OPTIONS['DATABASE'] at a PostgreSQL alias, or give the "
                        "queue's database as OPTIONS['DSN']"],
        "shardq.E004": ["TASKS['mysql']['OPTIONS']['DSN'] is a mysql:// URL, not a PostgreSQL "
                        "database", "HINT: give a postgresql://user:password@host:port/dbname "
                        "URL (cockroachdb:// for CockroachDB)"],
        "shardq.E005": ["TASKS['settings']: max_attempts (--max-attempts, SHARDQ_MAX_ATTEMPTS) "
                        "must be an integer between 1 and 2,147,483,647, got 'lots'",
                        "HINT: OPTIONS['SETTINGS'] holds shardq client settings, over the "
                        "SHARDQ_* variables (`shardq consume --help-all` lists them)"],
        "shardq.E006": ["TASKS['queues']['QUEUES'] has 'two words', which is not a shardq "
                        "queue name", "HINT: use 1-128 letters, digits, '_', '.', ':' or '-'"],
    }


def test_check_with_database_checks_reads_the_queue_databases(databases: Databases) -> None:
    python = interpreter(BACKPORT)
    url = databases.create(migrated=False)
    found = check(python, url, "--database", "default", "--database", "away")
    assert found["shardq.W001"] == [
        "the queue database of TASKS['default'] (DATABASES['default']) has no shardq schema",
        "HINT: run `manage.py shardq_migrate`"]
    message, hint = found["shardq.E007"]
    assert message.startswith("the queue database of TASKS['down'] (DATABASES['away']) cannot "
                              "be read: connection failed: ")
    assert hint == "HINT: check that its server runs and that the settings name it"
    # Only the aliases asked for are read: not 'away', nor the DSN of 'elsewhere'.
    migrate.upgrade(url, output=io.StringIO())
    assert not {"shardq.E007", "shardq.W001"} & check(python, url, "--database", "default").keys()


def options() -> Any:
    """shardq.contrib.django.options (Django is imported, not set up)."""
    pytest.importorskip("django")
    from shardq.contrib.django import options as module

    return module


def test_database_settings_become_a_libpq_url() -> None:
    url_of = options().url_of
    url = url_of({"NAME": "shop db", "USER": "app", "PASSWORD": "p@ss:/word", "HOST": "db.internal",
                  "PORT": 6432, "OPTIONS": {"sslmode": "require", "isolation_level": 1}})
    assert url.startswith("postgresql://")
    assert conninfo_to_dict(url) == {"dbname": "shop db", "user": "app", "password": "p@ss:/word",
                                     "host": "db.internal", "port": "6432", "sslmode": "require"}
    socket = url_of({"NAME": "shop", "HOST": "/var/run/postgresql", "PORT": "5433"})
    assert conninfo_to_dict(socket) == {"dbname": "shop", "host": "/var/run/postgresql",
                                        "port": "5433"}
    assert conninfo_to_dict(url_of({"NAME": "shop", "HOST": "::1"}))["host"] == "::1"
    pair = url_of({"NAME": "shop", "HOST": "db1,db2", "PORT": "5432,5433",
                   "OPTIONS": {"target_session_attrs": "read-write"}})
    assert conninfo_to_dict(pair) == {"dbname": "shop", "host": "db1,db2", "port": "5432,5433",
                                      "target_session_attrs": "read-write"}
    one_port = conninfo_to_dict(url_of({"NAME": "shop", "HOST": "db1,db2", "PORT": 6432}))
    assert (one_port["host"], one_port["port"]) == ("db1,db2", "6432,6432")


@pytest.mark.parametrize(("given", "message"), [
    ({"DSN": "postgresql://h/db", "DATABASE": "default"}, "has both DSN and DATABASE: give"),
    ({"DNS": "postgresql://h/db"}, " has unknown key 'DNS': OPTIONS takes DSN, DATABASE,"),
    ({"KEEP_RESULT_S": 0}, "['KEEP_RESULT_S'] must be a finite number between 1 and"),
    ({"KEEP_RESULT_S": None}, "['KEEP_RESULT_S'] must be a number of seconds: get_result"),
    ({"PRIORITY_STEP_S": 1.5}, "['PRIORITY_STEP_S'] must be a whole number of seconds"),
    ({"SETTINGS": {"dsn": "postgresql://h/db"}}, "['SETTINGS'] must be a dict of shardq"),
    ({"DSN": "mysql://h/db"}, "['DSN'] is a mysql:// URL, not a PostgreSQL database: give"),
    ({"DSN": "shop"}, "['DSN'] is neither a URL nor libpq key=value settings: give a"),
])
def test_bad_options_are_refused(given: dict[str, Any], message: str) -> None:
    module = options()
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured) as raised:
        module.read("default", given)
    assert message in str(raised.value)
    assert str(raised.value).startswith("TASKS['default']['OPTIONS']")
    assert "\n" not in str(raised.value)


def test_stored_tracebacks_name_their_exception_class() -> None:
    pytest.importorskip("django")
    from shardq.contrib.django.results import exception_path

    def stored(kind: type[Exception], fail: Callable[[], object]) -> str:
        """The traceback text a worker stores for the ``kind`` of error ``fail`` raises."""
        with pytest.raises(kind) as raised:
            fail()
        return "".join(traceback.format_exception(raised.value))

    def chained() -> None:
        try:
            raise KeyError("first")
        except KeyError as first:
            raise TimeoutError("second") from first

    assert exception_path(stored(ValueError, lambda: int("bad: input"))) == "builtins.ValueError"
    assert exception_path(stored(shardq.ConfigError,
                                 lambda: shardq.Client("mysql://h/db"))) == (
        "shardq.core.errors.ConfigError")
    # The last exception of a chain is the one the task failed with.
    assert exception_path(stored(TimeoutError, chained)) == "builtins.TimeoutError"
    assert exception_path("lease expired three times") == "builtins.Exception"


def test_the_worker_does_not_write_again_what_django_logging_wrote() -> None:
    pytest.importorskip("django")
    from shardq.contrib.django.worker import WrittenOnce

    written: list[str] = []

    class Collect(logging.Handler):
        """The worker's handler on the root logger, collecting what it would write."""

        def emit(self, record: logging.LogRecord) -> None:
            written.append(record.getMessage())

    worker_handler = Collect()
    worker_handler.addFilter(WrittenOnce())
    # As Django's "django" logger with its "console" handler (under DEBUG = True).
    console = logging.StreamHandler(sys.stderr)
    django_logger = logging.getLogger("test_django_logs")
    tasks_logger = logging.getLogger("test_django_logs.tasks")
    root = logging.getLogger()
    root.addHandler(worker_handler)
    django_logger.addHandler(console)
    try:
        tasks_logger.warning("written by Django's console handler")
        logging.getLogger("test_django_other").warning("written by the worker")
        console.setLevel(logging.ERROR)  # a record Django's handler leaves out
        tasks_logger.warning("left out by Django's handler")
    finally:
        django_logger.removeHandler(console)
        root.removeHandler(worker_handler)
    assert written == ["written by the worker", "left out by Django's handler"]
