"""Against a real CockroachDB cluster: migrations, the API, concurrent claims, the claim plan,
and flows (a chord's callback, a flow cancelled, a dead task dropped).

Runs only when ``SHARDQ_TEST_CRDB_DSN`` names a cluster, for instance
``cockroachdb://root@127.0.0.1:26257/shardq?sslmode=disable`` after
``docker compose up -d crdb1 crdb2 crdb3 crdb-init`` (see docker-compose.yml).  The
tests create their own databases on that cluster and drop them at the end.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from psycopg import sql

import shardq
from shardq.core import migrate, sqlfiles
from shardq.core.boundary import Layout, normalize_dsn
from shardq.core.db import read_layout
from shardq.core.dialect import COCKROACHDB
from shardq.loops.resolver import resolve
from tests import durable_kit
from tests.helpers import ack_keeping, claim_all, in_threads, scalar, with_dbname

CRDB_DSN = os.environ.get("SHARDQ_TEST_CRDB_DSN", "")
if not CRDB_DSN:
    pytest.skip(
        "no CockroachDB: set SHARDQ_TEST_CRDB_DSN=cockroachdb://root@host:26257/db?sslmode=disable "
        "(docker compose up crdb1 crdb2 crdb3 crdb-init)",
        allow_module_level=True,
    )
pytest.importorskip(
    "sqlalchemy_cockroachdb",
    reason="sqlalchemy-cockroachdb is needed to migrate CockroachDB (pip install "
    "'shardq[cockroachdb]')",
)

pytestmark = pytest.mark.cockroachdb

BUCKETS = 8
# The hidden shard column of the primary key (queue, status, exec_time, id): CockroachDB
# names it from the key columns sorted by name (see test_cockroachdb_offline.py).
SHARD = f"crdb_internal_exec_time_id_queue_status_shard_{BUCKETS}"

# The newest revision: the migrations directory's highest number.
HEAD = max(p.name[:4] for p in
           (Path(__file__).resolve().parent.parent / "migrations" / "versions").glob("0*.py"))


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(normalize_dsn(url), autocommit=True)


def upgrade(url: str) -> None:
    with open(os.devnull, "w") as sink:
        migrate.upgrade(url, bucket_count=BUCKETS, output=sink)


def shard_of(conn: psycopg.Connection[Any], task_id: uuid.UUID) -> int:
    """The bucket (shard column value) the row of ``task_id`` is in now."""
    query = sql.SQL("SELECT {} FROM shardq.tasks WHERE id = %s").format(sql.Identifier(SHARD))
    return int(scalar(conn, query, (task_id,)))


# -- databases ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def new_database() -> Iterator[Callable[[], str]]:
    """Factory of fresh, empty databases on the cluster, dropped at the end of the module."""
    created: list[str] = []

    def create() -> str:
        name = f"shardq_test_{uuid.uuid4().hex[:12]}"
        with connect(CRDB_DSN) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        created.append(name)
        return with_dbname(CRDB_DSN, name)

    yield create
    if not created:
        return
    with connect(CRDB_DSN) as conn:
        for name in created:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def assert_schema_gone(url: str) -> None:
    """After a downgrade to base: no shardq schema, no applied revision."""
    with connect(url) as conn:
        schemas = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'shardq'"
        assert scalar(conn, schemas) == 0
        assert scalar(conn, "SELECT count(*) FROM shardq_alembic_version") == 0
        with pytest.raises(shardq.SchemaNotReady):
            read_layout(conn)


@pytest.fixture(scope="module")
def url(new_database: Callable[[], str]) -> Iterator[str]:
    """A database migrated to head (twice: the second run has nothing to do), then to base."""
    url = new_database()
    upgrade(url)
    upgrade(url)
    yield url
    migrate.downgrade(url, revision="base")
    assert_schema_gone(url)


@pytest.fixture
def client(url: str) -> Iterator[shardq.Client]:
    """A Client on the module's database, emptied first (TRUNCATE is a schema change here)."""
    with connect(url) as conn:
        conn.execute("DELETE FROM shardq.tasks")
    with shardq.Client(url) as c:
        yield c


@pytest.fixture
def conn(url: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(url) as c:
        yield c


# -- the schema ---------------------------------------------------------------------------------


def test_layout_finds_the_shard_column(client: shardq.Client) -> None:
    assert client.db.layout == Layout(COCKROACHDB, SHARD, BUCKETS, tracked=True)
    assert client.dialect is COCKROACHDB
    assert client.bucket_count == BUCKETS


def test_schema_at_head(conn: psycopg.Connection[Any]) -> None:
    assert conn.execute("SELECT version_num FROM shardq_alembic_version").fetchall() == [(HEAD,)]
    columns = conn.execute(
        "SELECT column_name, generation_expression FROM information_schema.columns "
        "WHERE table_schema = 'shardq' AND table_name = 'tasks' "
        "AND column_name LIKE 'crdb_internal%'"
    ).fetchall()
    assert [c[0] for c in columns] == [SHARD]
    # The shard is a hash of every key column: claims and lease changes move rows between
    # buckets, unlike PostgreSQL's bucket, which depends on the id alone.
    expression = columns[0][1]
    assert all(c in expression for c in ("exec_time", "id", "queue", "status")), expression
    leading = conn.execute(
        "SELECT index_name, column_name FROM [SHOW INDEXES FROM shardq.tasks] "
        "WHERE seq_in_index = 1 ORDER BY index_name"
    ).fetchall()
    assert leading == [
        ("tasks_head_starts", SHARD),
        ("tasks_leases", SHARD),
        ("tasks_pkey", SHARD),
    ]
    zone = conn.execute("SHOW ZONE CONFIGURATION FROM TABLE shardq.tasks").fetchone()
    assert zone is not None
    assert re.search(r"gc\.ttlseconds = 600\b", str(zone[1])), zone


def test_every_revision_reruns_over_an_existing_schema(new_database: Callable[[], str]) -> None:
    url = new_database()
    upgrade(url)
    with open(os.devnull, "w") as sink:
        # Forget the applied revisions, then apply them all again over the schema.
        command.stamp(migrate.alembic_config(url, bucket_count=BUCKETS, output=sink), "base")
    upgrade(url)
    with connect(url) as conn:
        assert scalar(conn, "SELECT version_num FROM shardq_alembic_version") == HEAD
        assert read_layout(conn) == Layout(COCKROACHDB, SHARD, BUCKETS, tracked=True)


def test_downgrade_to_base_and_up_again(new_database: Callable[[], str]) -> None:
    url = new_database()
    upgrade(url)
    with shardq.Client(url) as c:
        c.enqueue_many("doomed", [{"i": i} for i in range(10)])
    migrate.downgrade(url, revision="base")
    assert_schema_gone(url)
    upgrade(url)
    with connect(url) as conn:
        assert read_layout(conn) == Layout(COCKROACHDB, SHARD, BUCKETS, tracked=True)
        assert scalar(conn, "SELECT count(*) FROM shardq.tasks") == 0


# -- the API ------------------------------------------------------------------------------------


def test_enqueue_get_claim_ack(client: shardq.Client, conn: psycopg.Connection[Any]) -> None:
    task_id = client.enqueue("emails", {"to": "a@example.com"})
    info = client.get(task_id)
    assert info is not None
    assert (info.queue, info.state) == ("emails", "available")
    assert info.payload == {"to": "a@example.com"}
    assert info.attempts == 0
    assert info.max_attempts == 10
    assert info.bucket == shard_of(conn, task_id)

    (task,) = claim_all(client, "emails")
    assert task.id == task_id
    assert task.attempts == 1
    assert task.bucket == shard_of(conn, task_id)  # the row's bucket after the claim
    info = client.get(task_id)
    assert info is not None
    assert info.state == "locked"
    assert info.lease_token == task.lease_token

    client.ack(task)
    assert client.get(task_id) is None
    with pytest.raises(shardq.LeaseLost):
        client.ack(task)
    assert client.get(uuid.uuid4()) is None


def test_enqueue_many_and_stats(client: shardq.Client) -> None:
    ids = client.enqueue_many("bulk", [{"n": i} for i in range(200)], max_attempts=3, priority=7)
    assert len(set(ids)) == 200
    client.enqueue("bulk", {"later": True}, delay_s=3600)
    stats = client.stats("bulk")
    counts = (stats["available"], stats["scheduled"], stats["locked"], stats["dead"])
    assert counts == (200, 1, 0, 0)
    assert stats["oldest_eligible_age_s"] >= 7
    # The batch's INSERT counts what it wrote (sql/cockroachdb/enqueue_many.sql).
    assert sum(m.enqueued for m in client.throughput("bulk")) == 201
    info = client.get(ids[0])
    assert info is not None
    assert info.payload == {"n": 0}
    assert info.priority == 7

    tasks = claim_all(client, "bulk")
    assert sorted(t.id for t in tasks) == sorted(ids)
    assert all(t.max_attempts == 3 and t.priority == 7 for t in tasks)
    assert client.stats("bulk")["locked"] == 200

    client.ack_many(tasks)
    stats = client.stats("bulk")
    assert (stats["available"], stats["scheduled"], stats["locked"]) == (0, 1, 0)
    assert client.stats("nothing-here")["available"] == 0


def test_nack_puts_a_task_back_then_kills_it(client: shardq.Client) -> None:
    task_id = client.enqueue("nack", {"a": 1}, max_attempts=2)
    (task,) = claim_all(client, "nack")
    client.nack(task, "boom", retry_in_s=0)
    info = client.get(task_id)
    assert info is not None
    assert (info.state, info.last_error, info.attempts) == ("available", "boom", 1)
    assert info.lease_token is None
    assert info.times_requeued == 1

    (task,) = claim_all(client, "nack")
    assert task.attempts == 2
    assert task.is_last_attempt
    client.nack(task, "boom again")
    info = client.get(task_id)
    assert info is not None
    assert info.state == "dead"
    assert info.last_error == "boom again"
    assert client.stats("nack")["dead"] == 1


def test_extend_keeps_the_tasks_addressable(
    client: shardq.Client, conn: psycopg.Connection[Any]
) -> None:
    # exec_time is part of the hashed key, so a longer lease moves the row to another
    # bucket (7 times in 8): the Task must follow it, or the ack finds nothing.
    ids = client.enqueue_many("extend", [{"i": i} for i in range(8)])
    tasks = claim_all(client, "extend", lease_s=30)
    assert len(tasks) == 8
    before = {t.id: t.exec_time for t in tasks}
    client.extend_many(tasks, 3600)
    for t in tasks:
        assert t.exec_time > before[t.id] + timedelta(minutes=50)
        assert t.bucket == shard_of(conn, t.id)
    client.ack_many(tasks)
    assert all(client.get(i) is None for i in ids)


def test_release_gives_a_task_back_without_penalty(client: shardq.Client) -> None:
    task_id = client.enqueue("release", {})
    (task,) = claim_all(client, "release")
    client.release(task)
    info = client.get(task_id)
    assert info is not None
    assert (info.state, info.attempts, info.times_requeued) == ("available", 0, 1)
    assert info.lease_token is None
    with pytest.raises(shardq.LeaseLost):
        client.ack(task)
    (again,) = claim_all(client, "release")
    assert again.id == task_id
    assert again.attempts == 1
    client.ack(again)


def test_janitor_rescues_expired_leases_and_applies_head_starts(
    url: str, client: shardq.Client
) -> None:
    # `client` only empties the table: this test drives time with its own Client's clock.
    clock = shardq.ManualClock(datetime.now(UTC))
    with shardq.Client(url, clock=clock) as timed:
        leased = timed.enqueue("janitor", {"a": 1})
        (task,) = claim_all(timed, "janitor", lease_s=30)
        scheduled = timed.enqueue("janitor", {"b": 1}, delay_s=60, priority=600)
        assert timed.run_janitor_once().total == 0  # nothing expired or due yet

        clock.advance(120)
        report = timed.run_janitor_once()
        assert (report.rescued, report.dead, report.promoted) == (1, 0, 1)

        info = timed.get(leased)
        assert info is not None
        assert info.status == "available"
        assert info.lease_token is None
        assert info.last_error is not None
        assert info.last_error.startswith("lease expired")
        with pytest.raises(shardq.LeaseLost):
            timed.ack(task)
        info = timed.get(scheduled)
        assert info is not None
        assert info.pending_head_start_s == 0
        # Due at enqueue + 60 s, it now stands 600 s ahead of that.
        assert info.exec_time == info.enqueued_at + timedelta(seconds=60 - 600)
        assert timed.run_janitor_once().total == 0


def test_concurrent_claims_never_hand_out_a_task_twice(url: str, client: shardq.Client) -> None:
    n = 400
    ids = set(client.enqueue_many("race", [{"i": i} for i in range(n)]))
    held: list[list[shardq.Task]] = [[] for _ in range(4)]
    count = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + 120

    def worker(k: int) -> None:
        with shardq.Client(url, pool_max_size=2) as own:
            while time.monotonic() < deadline:
                with lock:
                    if count[0] >= n:
                        return
                got = own.claim("race", limit=7, lease_s=600)
                held[k] += got
                with lock:
                    count[0] += len(got)

    errors = in_threads(*(functools.partial(worker, k) for k in range(4)))
    assert not errors, errors
    claimed = [t.id for tasks in held for t in tasks]
    assert len(claimed) == len(set(claimed)), "a task was handed out twice"
    assert set(claimed) == ids
    client.ack_many([t for tasks in held for t in tasks])
    assert client.stats("race")["locked"] == 0


# -- the claim's plan ---------------------------------------------------------------------------


def plan_nodes(plan: str) -> list[dict[str, str]]:
    """The operators of an EXPLAIN tree, each as its ``key: value`` properties."""
    nodes: list[dict[str, str]] = []
    for line in plan.splitlines():
        body = line.strip(" │├└─")
        if body.startswith("• "):
            nodes.append({"node": body[2:].strip()})
        elif nodes and ": " in body:
            key, _, value = body.partition(": ")
            nodes[-1].setdefault(key, value)
    return nodes


@pytest.mark.parametrize("binding", ["client", "server"])
def test_claim_reads_one_span_of_one_bucket(url: str, client: shardq.Client, binding: str) -> None:
    client.enqueue_many("plan", [{"i": i} for i in range(64)])
    bucket = 3
    query = sqlfiles.query("claim", "cockroachdb", client.db.layout.bucket_column, 10)
    params = client.statements.params(queue="plan", bucket=bucket, lease_s=30.0,
                                      token=uuid.uuid4(), worker_id=None)
    # "client": the values inlined as literals; "server": sent as typed parameters, the way
    # the Client sends them (the bucket as an int2 against the INT8 shard column).
    factory = psycopg.ClientCursor if binding == "client" else psycopg.Cursor
    with psycopg.connect(normalize_dsn(url), autocommit=True, cursor_factory=factory) as c:
        try:
            rows = c.execute(sql.SQL("EXPLAIN ") + query, params).fetchall()
        except psycopg.errors.FeatureNotSupported as exc:
            pytest.skip(f"this CockroachDB cannot EXPLAIN a statement with parameters: {exc}")
    plan = "\n".join(str(r[0]) for r in rows)

    assert "FULL SCAN" not in plan, plan
    assert "LIMITED SCAN" not in plan, plan
    scans = [n for n in plan_nodes(plan) if n["node"] == "scan"]
    assert scans, plan
    assert all(n.get("table", "").startswith("tasks@") for n in scans), plan
    prefix = re.escape(f"/{bucket}/'plan'/'available'")
    picks = [n for n in scans if re.match(r"\[" + prefix, n.get("spans", ""))]
    assert len(picks) == 1, plan
    (pick,) = picks
    assert pick["table"] == "tasks@tasks_pkey", plan
    spans = re.findall(r"\[[^\]]*\]", pick["spans"])
    assert len(spans) == 1, plan  # one span ...
    # ... inside this bucket's range of available tasks of the queue, at both ends.
    assert re.fullmatch(rf"\[{prefix}(/[^\]]*)? - {prefix}(/[^\]]*)?\]", spans[0]), plan
    assert pick.get("locking strength") == "for update", plan
    assert "skip locked" in pick.get("locking wait policy", "").lower(), plan


# -- flows --------------------------------------------------------------------------------

FLOWS = "crdb-flows"
flows_app = shardq.App()  # its functions name the tasks; the tests run them by hand


@flows_app.task(queue=FLOWS)
def square(n: int) -> int:
    return n * n


@flows_app.task(queue=FLOWS)
def total(squares: list[int]) -> int:
    return sum(squares)


def run_all(client: shardq.Client) -> list[shardq.Task]:
    """Claim every task of the flows' queue and ack each with its handler's result, kept
    as a worker keeps a flow task's (until its flow ends)."""
    tasks = claim_all(client, FLOWS)
    handlers: dict[str, Callable[..., Any]] = {square.name: square.fn, total.name: total.fn}
    ack_keeping(client, tasks, [handlers[t.payload["task"]](*t.payload["args"]) for t in tasks])
    return tasks


def test_a_chord_calls_back_once_with_its_members_results(client: shardq.Client) -> None:
    handle = client.enqueue_flow(shardq.chord([square.s(n) for n in range(1, 6)], total.s()))
    members = run_all(client)
    assert sorted(t.id for t in members) == sorted(handle.ids[:5])
    assert claim_all(client, FLOWS) == []  # the callback waits for the fold
    report = resolve(client.statements)
    assert (report.events, report.released) == (5, 1)
    [callback] = run_all(client)
    assert callback.id == handle.ids[5] == handle.result_id
    assert callback.payload["args"] == [[1, 4, 9, 16, 25]]  # in the members' order
    assert resolve(client.statements).finished == 1
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.kind, flow.state, flow.counts["succeeded"]) == ("chord", "succeeded", 6)
    assert flow.finished_at is not None
    result = client.result(handle.result_id)
    assert result is not None
    assert result.value == 55
    assert resolve(client.statements).events == 0  # every event was folded once


def test_a_flow_cancelled_and_a_dead_task_dropped(client: shardq.Client) -> None:
    cancelled = client.enqueue_flow(shardq.chain(square.s(2), square.s(), total.si([1])))
    assert client.cancel_flow(cancelled.id) == 3  # one due, two waiting
    flow = client.flow(cancelled.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"]) == ("cancelled", 3)

    dropped = client.enqueue_flow(shardq.chord([square.s(1), square.s(2)], total.s()))
    first, second = claim_all(client, FLOWS)
    client.nack(first, "boom", dead=True)
    ack_keeping(client, [second], [4])
    resolve(client.statements)
    flow = client.flow(dropped.id)
    assert flow is not None
    assert (flow.state, flow.counts["dead"], flow.counts["waiting"]) == ("failed", 1, 1)
    assert client.purge_dead(FLOWS) == 1
    # The callback, which would never run, is cancelled; its own event ends the flow.
    report = resolve(client.statements) + resolve(client.statements)
    assert report.cancelled == 1
    flow = client.flow(dropped.id)
    assert flow is not None
    assert flow.counts["waiting"] == 0
    assert flow.finished_at is not None
    assert claim_all(client, FLOWS) == []


# -- durable tasks -----------------------------------------------------------------------


def test_a_durable_task_parks_on_an_event_and_resumes(client: shardq.Client) -> None:
    """A step checkpointed once, a park on an event (the event's row written under
    serializable isolation), the emit's wake-up, the replay, the checkpoints deleted."""
    durable_kit.a_durable_task_parks_and_resumes(client, "durable")


# -- changing the bucket count (shardq.ops.reshard) ----------------------------------------------


def test_a_reshard_up_and_down_keeps_every_task(new_database: Callable[[], str]) -> None:
    """8 → 32 → 4 buckets: each layout's claim index is a hash-sharded secondary index
    of the key's columns, whose shard column the claims name; every task is claimed
    once, and the indexes of each retired layout are gone."""
    url = new_database()
    upgrade(url)
    with shardq.Client(url) as client:
        ids = set(client.enqueue_many("resharded", [{"n": n} for n in range(200)]))
        status = client.reshard(32)
        assert (status.bucket_count, status.phase) == (32, "done")
        assert client.db.layout == Layout(COCKROACHDB, SHARD.replace("_8", "_32"), 32,
                                           generation=1, tracked=True)
        half = claim_all(client, "resharded", most=100)
        assert client.reshard(4).phase == "done"
        rest = claim_all(client, "resharded")
        assert {t.id for t in half} | {t.id for t in rest} == ids
        assert len(half) + len(rest) == len(ids)
    with connect(url) as conn:
        names = {r[0] for r in conn.execute(
            "SELECT DISTINCT index_name FROM information_schema.statistics "
            "WHERE table_schema = 'shardq' AND table_name = 'tasks'").fetchall()}
    assert {"tasks_claim_4", "tasks_leases_4", "tasks_head_starts_4"} <= names
    assert not names & {"tasks_claim_32", "tasks_leases_32", "tasks_leases", "tasks_head_starts"}
