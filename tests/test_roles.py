"""Least-privileged roles, on the test server: the migrations run as an owner that is no
superuser, workers and producers as a role with only the grants of ``shardq migrate
--grants``, a dashboard as a role with those of ``--read-only``, and every refusal is
one line that names the role and the fix.

Roles are the cluster's, not a database's: each run makes its own under random names
and drops them at the end.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import psycopg
import pytest
from psycopg import sql

import shardq
from shardq.core import migrate
from shardq.loops import vacuum
from shardq.web import create_app
from tests.conftest import Databases
from tests.daemons import app_daemon
from tests.helpers import (
    claim_all,
    one_line_error,
    scalar,
    shardq_cli,
    wait_for,
    with_user,
)
from tests.web import TOKEN, call, log_in, serving

pytestmark = pytest.mark.server

KINDS = ("owner", "worker", "dashboard", "nobody")
BEFORE_LATER_TABLES = "0023"  # shardq.workers and shardq.attempts come with 0024
MAINTAIN_SINCE = 170000
APP = '''\
import shardq

app = shardq.App()


@app.task(queue="roles", keep_result_s=60)
def double(n: int) -> int:
    if shardq.current().task.attempts == 1:
        raise shardq.Retry(in_s=0)  # a second attempt: the first is recorded
    return 2 * n


@app.task(queue="roles", keep_result_s=60)
def total(values: list[int]) -> int:
    return sum(values)


@app.periodic(every_s=3600, queue="roles")
def hourly() -> None:
    pass
'''


@dataclass(frozen=True)
class Roles:
    """The test database (its admin URL), and a URL and a name for each kind of role."""

    admin: str
    urls: dict[str, str]
    names: dict[str, str]
    setup: dict[str, str]
    """What each step of the owner's setup printed."""


def _role_sql(template: str, *names: str) -> sql.Composed:
    return sql.SQL(template).format(*(sql.Identifier(n) for n in names))


@pytest.fixture(scope="module")
def roles(databases: Databases) -> Iterator[Roles]:
    """A database whose schema an owner role (no superuser: CREATE on the database and on
    the schema public) migrated to 0023, granted the worker and the dashboard their use,
    then migrated to head; and a role granted nothing."""
    suffix = uuid.uuid4().hex[:8]
    names = {kind: f"shardq_{kind}_{suffix}" for kind in KINDS}
    password = uuid.uuid4().hex
    admin = databases.create(migrated=False)
    database = urlsplit(admin).path.lstrip("/")
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names.values():
            conn.execute(_role_sql("CREATE ROLE {} LOGIN PASSWORD ", name)
                         + sql.Literal(password))
        conn.execute(_role_sql("GRANT CREATE ON DATABASE {} TO {}", database, names["owner"]))
        # As PostgreSQL 15 and managed databases have it: nobody creates in public unless
        # granted (14 grants it to PUBLIC by default).
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        conn.execute(_role_sql("GRANT CREATE ON SCHEMA public TO {}", names["owner"]))
    urls = {kind: with_user(admin, name, password) for kind, name in names.items()}
    try:
        owner = urls["owner"]
        setup = {
            "create": shardq_cli("migrate", "--revision", BEFORE_LATER_TABLES, "--grants",
                                 names["worker"], dsn=owner).stdout,
            "dashboard": shardq_cli("migrate", "--revision", BEFORE_LATER_TABLES, "--grants",
                                    names["dashboard"], "--read-only", dsn=owner).stdout,
            "upgrade": shardq_cli("migrate", dsn=owner).stdout,
        }
        yield Roles(admin, urls, names, setup)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names.values():  # its objects, privileges and default privileges
                conn.execute(_role_sql("DROP OWNED BY {}", name))
            for name in names.values():
                conn.execute(_role_sql("DROP ROLE {}", name))


def test_the_owner_migrates_and_grants_without_being_a_superuser(roles: Roles) -> None:
    worker, owner = roles.names["worker"], roles.names["owner"]
    assert roles.setup["create"].splitlines() == [
        f"schema created at revision {BEFORE_LATER_TABLES}",
        f"granted {worker} read-write use of the schema shardq (and of the tables later "
        f"revisions make, when {owner} runs them)"]
    assert roles.setup["dashboard"].splitlines()[1].startswith(
        f"granted {roles.names['dashboard']} read-only use of the schema shardq")
    assert roles.setup["upgrade"] == (f"schema upgraded from revision {BEFORE_LATER_TABLES} "
                                      f"to {migrate.head()} (head)\n")
    powers = scalar(roles.admin, "SELECT ARRAY[rolsuper, rolcreaterole, rolcreatedb] "
                                 "FROM pg_roles WHERE rolname = %s", (owner,))
    assert powers == [False, False, False]
    assert scalar(roles.admin, "SELECT pg_get_userbyid(nspowner) FROM pg_namespace "
                               "WHERE nspname = 'shardq'") == owner


def test_the_roles_hold_their_grants_and_nothing_more(roles: Roles) -> None:
    """Every table of the schema, those of the revisions after the grants included (the
    owner's default privileges); nothing on the database or on public, no superuser."""
    database = urlsplit(roles.admin).path.lstrip("/")
    tables = [r[0] for r in psycopg.connect(roles.admin).execute(
        "SELECT 'shardq.' || tablename FROM pg_tables WHERE schemaname = 'shardq'")]
    assert {"shardq.attempts", "shardq.workers", "shardq.tasks", "shardq.flows",
            "shardq.flow_events"} <= set(tables)

    def may(role: str, privilege: str, table: str) -> bool:
        return bool(scalar(roles.admin, "SELECT has_table_privilege(%s, %s, %s)",
                           (role, table, privilege)))

    # A dashboard's own records (its sessions, the audit trail) are its to write once
    # the grants are run on a schema that has them (a test below runs them again).
    own = ("shardq.sessions", "shardq.audit")
    for kind, writes in (("worker", True), ("dashboard", False)):
        role = roles.names[kind]
        for table in tables:
            assert may(role, "SELECT", table), (kind, table)
            for privilege in ("INSERT", "UPDATE", "DELETE"):
                if not writes and table in own:
                    continue
                assert may(role, privilege, table) == writes, (kind, privilege, table)
            assert not may(role, "TRUNCATE", table)
        held = scalar(roles.admin, "SELECT ARRAY[rolsuper, has_database_privilege(%s, %s, "
                      "'CREATE'), has_schema_privilege(%s, 'public', 'CREATE'), "
                      "has_schema_privilege(%s, 'shardq', 'CREATE')] FROM pg_roles "
                      "WHERE rolname = %s", (role, database, role, role, role))
        assert held == [False, False, False, False], kind
    version = scalar(roles.admin, "SHOW server_version_num")
    with psycopg.connect(roles.urls["worker"]) as conn:
        # The janitor's vacuum step: MAINTAIN on PostgreSQL 17+, else left to autovacuum.
        assert vacuum.look_at(conn).permitted == (int(version) >= MAINTAIN_SINCE)


def test_producers_and_a_worker_daemon_run_as_the_worker_role(roles: Roles,
                                                              tmp_path: Path) -> None:
    url = roles.urls["worker"]
    with (app_daemon(tmp_path, "roles_app", APP, url) as (roles_app, daemon),
          shardq.Client(url) as client):
        roles_app.app.use_client(client)
        first = roles_app.double.enqueue(21)

        async def produce() -> Any:  # on the app's AsyncClient, on the same settings
            try:
                return await roles_app.double.aenqueue(4)
            finally:
                await roles_app.app.aclose()

        second = asyncio.run(produce())
        assert client.result(first, wait_s=30).value == 42, daemon.output
        assert client.result(second, wait_s=30).value == 8
        assert [a.outcome for a in client.attempts(first)] == ["failed", "acked"]
        assert [w.name for w in client.workers()]
        wait_for(lambda: scalar(url, "SELECT count(*) FROM shardq.periodic") == 1,
                 what="the periodic schedule's registration")
        assert client.run_janitor_once().rescued == 0
    assert daemon.proc.returncode == 0, daemon.output
    assert "Traceback" not in daemon.output
    assert "permission denied" not in daemon.output


def test_a_worker_role_runs_a_chord_end_to_end(roles: Roles, tmp_path: Path) -> None:
    """A producer writes the flow and its tasks, the daemon's acks write its events, its
    resolver folds them (locks and updates shardq.flows, deletes shardq.flow_events),
    releases the callback and ends the flow: all as the worker role."""
    url = roles.urls["worker"]
    with (app_daemon(tmp_path, "roles_chord", APP, url) as (chord_app, daemon),
          shardq.Client(url) as client):
        chord_app.app.use_client(client)
        handle = client.enqueue_flow(shardq.chord(
            [chord_app.double.si(n) for n in (1, 2, 3)], chord_app.total.s()))
        assert handle.result_id is not None
        assert client.result(handle.result_id, wait_s=60).value == 12, daemon.output
        wait_for(lambda: scalar(url, "SELECT finished_at IS NOT NULL FROM shardq.flows "
                                     "WHERE id = %s", (handle.id,)), what="the chord's end")
        flow = client.flow(handle.id)
        assert flow is not None
        assert (flow.state, flow.counts["succeeded"]) == ("succeeded", 4)
        assert scalar(url, "SELECT count(*) FROM shardq.flow_events WHERE flow_id = %s",
                      (handle.id,)) == 0
    assert daemon.proc.returncode == 0, daemon.output
    assert "permission denied" not in daemon.output


def test_doctor_runs_as_the_worker_role_and_says_what_it_cannot_see(roles: Roles) -> None:
    done = shardq_cli("doctor", dsn=roles.urls["worker"], check=False)
    assert done.returncode in (0, 1), done
    assert "Traceback" not in done.stderr
    worker = roles.names["worker"]
    assert (f"other roles' transactions are hidden from role {worker}" in done.stdout
            or "autovacuum is off" in done.stdout), done.stdout  # that finding comes first
    assert "check failed" not in done.stdout, done.stdout


def test_the_dashboard_role_reads_and_its_actions_are_refused_in_one_line(
        roles: Roles) -> None:
    dashboard = roles.names["dashboard"]
    with shardq.Client(roles.urls["worker"]) as worker:
        dead = worker.enqueue("shown", {"n": 1})
        [task] = claim_all(worker, "shown")
        worker.nack(task, "a dead letter to retry", dead=True)
        worker.enqueue("shown", {"n": 2})
    with shardq.Client(roles.urls["dashboard"]) as client, \
            serving(create_app(client, token=TOKEN)) as site:
        assert "shown" in {q["queue"] for q in call(f"{site}/api/queues").json()["queues"]}
        assert call(f"{site}/queues/shown").status == 200
        refused = call(f"{site}/api/queues/shown/pause", "POST", token=TOKEN)
        assert refused.status == 403
        message = refused.json()["error"]
        assert message.startswith(f"permission denied for table queues (role {dashboard}): "
                                  "the dashboard's role may not do this"), message
        assert "\n" not in message
        retried = call(f"{site}/api/dead/retry", "POST", {"ids": [str(dead)]}, token=TOKEN)
        assert (retried.status, retried.json()["error"]) == (
            403, message.replace("table queues", "table tasks"))
        # Granted before revision 0028, the role is granted again, as the upgrade asks:
        # then its sessions and the audit trail are its to write.
        shardq_cli("migrate", "--grants", dashboard, "--read-only", dsn=roles.urls["owner"])
        me = log_in(site, TOKEN)
        page = call(f"{site}/actions/queues/shown/purge", "POST",
                    form=urlencode({"csrf": me.csrf}).encode(), cookie=me.cookie)
        assert page.status == 403
        assert "permission denied for table tasks" in page.text
        with pytest.raises(shardq.PermissionDenied) as caught:
            client.enqueue("shown", {"n": 3})
    assert caught.value.role == dashboard
    assert str(caught.value) == (
        f"permission denied for table tasks (role {dashboard}): the schema's owner grants a "
        f"role what shardq needs with `shardq migrate --grants {dashboard}` (`--read-only`: "
        "reads only, as for a dashboard)")
    one_line_error(shardq_cli("queue", "pause", "shown", dsn=roles.urls["dashboard"],
                              check=False), "permission denied for table queues", dashboard)


def test_a_role_without_grants_is_told_who_may_grant_them(roles: Roles) -> None:
    nobody, owner = roles.names["nobody"], roles.names["owner"]
    with pytest.raises(shardq.PermissionDenied) as caught:
        shardq.Client(roles.urls["nobody"])
    assert str(caught.value) == (
        f"permission denied for schema shardq (role {nobody}): as {owner} (the schema's "
        f"owner), run `shardq migrate --grants {nobody}` (`--read-only`: reads only, as for "
        "a dashboard)")

    async def open_async() -> None:
        async with shardq.AsyncClient(roles.urls["nobody"]):
            pass

    with pytest.raises(shardq.PermissionDenied, match="permission denied for schema shardq"):
        asyncio.run(open_async())
    one_line_error(shardq_cli("stats", dsn=roles.urls["nobody"], check=False),
                   "permission denied for schema shardq", f"--grants {nobody}")
    one_line_error(shardq_cli("migrate", dsn=roles.urls["nobody"], check=False),
                   "permission denied for table shardq_alembic_version", "schema's owner")
    one_line_error(shardq_cli("migrate", "--grants", nobody, dsn=roles.urls["worker"],
                              check=False),
                   "permission denied to grant the use of the schema shardq",
                   f"as {owner}, the schema's owner")
    # The worker reads the revision (its grants include the version table): nothing to do.
    assert shardq_cli("migrate", dsn=roles.urls["worker"]).stdout.startswith(
        "schema already at revision")


def granted(statement: str, role: str) -> str:
    """``statement`` as shardq prints it for ``role``: the role quoted as an identifier
    where ``{}`` stands."""
    return sql.SQL(statement).format(sql.Identifier(role)).as_string(None)


def test_the_grants_print_as_sql(roles: Roles) -> None:
    worker, owner = roles.names["worker"], roles.names["owner"]
    printed = shardq_cli("migrate", "--grants", worker, "--sql", dsn=roles.urls["owner"]).stdout
    assert granted("GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA shardq TO {};",
                   worker) in printed
    assert granted("ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA shardq", owner) in printed
    read_only = shardq_cli("migrate", "--grants", worker, "--read-only", "--sql",
                           dsn=roles.urls["owner"]).stdout
    assert granted("GRANT SELECT ON ALL TABLES IN SCHEMA shardq TO {};", worker) in read_only
    # It writes only the dashboard's own records: its sessions and the audit trail.
    writes = [line for line in read_only.splitlines() if "INSERT" in line]
    assert writes == [
        granted("GRANT INSERT, UPDATE, DELETE ON TABLE shardq.sessions TO {};", worker),
        granted("GRANT INSERT ON TABLE shardq.audit TO {};", worker)]
    assert "MAINTAIN" not in read_only
    spark = shardq_cli("migrate", "--grants", worker, "--spark", "--sql",
                       dsn=roles.urls["owner"]).stdout
    assert granted("GRANT CREATE ON SCHEMA shardq TO {};", worker) in spark
    # Printed, not run: the worker still may not create in the schema.
    assert scalar(roles.admin, "SELECT has_schema_privilege(%s, 'shardq', 'CREATE')",
                  (worker,)) is False
    one_line_error(shardq_cli("migrate", "--read-only", dsn=roles.urls["owner"], check=False),
                   "qualify --grants ROLE")
