"""Changing the bucket count of a live schema (``shardq reshard``, shardq.ops.reshard):
nothing is lost or stranded, every feature works on the new layout, a reshard rolls
back and carries on, refuses what would break it, and waits for what it must."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
import pytest

import shardq
from shardq.core import migrate, sqlfiles
from shardq.core.boundary import LAYOUT_CHECK_S
from shardq.core.task import TaskInfo
from shardq.ops import reshard
from shardq.ops.reshard import ReshardStatus, Step
from tests.conftest import Databases
from tests.helpers import (
    ack_keeping,
    bucket_of,
    claim_all,
    one_line_error,
    query,
    scalar,
    shardq_cli,
    wait_for,
)

pytestmark = pytest.mark.server

Q, LIMITED, KEYED = "rs", "rs-limited", "rs-keyed"


@pytest.fixture
def url(databases: Databases) -> str:
    """A fresh schema of 16 buckets (the stored column), whatever SHARDQ_TEST_RESHARDED."""
    return databases.create(bucket_count=16)


def layout_of(url: str) -> tuple[int, bool, int, str]:
    row = query(url, "SELECT bucket_count, expression, generation, phase FROM shardq.layout")[0]
    return row[0], row[1], row[2], row[3]


def indexes(url: str) -> set[str]:
    rows = query(url, "SELECT indexname FROM pg_indexes WHERE schemaname = 'shardq' "
                      "AND tablename = 'tasks'")
    return {r[0] for r in rows}


def has_bucket_column(url: str) -> bool:
    return bool(scalar(url, "SELECT count(*) FROM information_schema.columns WHERE "
                            "table_schema = 'shardq' AND table_name = 'tasks' "
                            "AND column_name = 'bucket'"))


def info(client: shardq.Client, task_id: UUID) -> TaskInfo:
    found = client.get(task_id)
    assert found is not None
    return found


def until(predicate: Callable[[Step], bool]) -> tuple[threading.Event, Callable[[Step], None],
                                                      list[Step]]:
    """A stop event set after the first step that ``predicate`` accepts, the ``on_step``
    that sets it, and the steps seen."""
    stop, seen = threading.Event(), []

    def on_step(step: Step) -> None:
        seen.append(step)
        if predicate(step):
            stop.set()

    return stop, on_step, seen


def reshard_with(kind: str, url: str, count: int) -> ReshardStatus:
    """A reshard to ``count`` by the blocking or the asyncio client."""
    if kind == "Client":
        with shardq.Client(url) as client:
            return client.reshard(count)

    async def run() -> ReshardStatus:
        async with shardq.AsyncClient(url) as client:
            return await client.reshard(count)

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
def test_a_reshard_up_and_down_keeps_every_task_and_what_it_holds(url: str, kind: str) -> None:
    with shardq.Client(url) as client:
        plain = set(client.enqueue_many(Q, [{"n": n} for n in range(300)]))
        keyed = {client.enqueue(KEYED, {"k": k}, key=f"k{k}") for k in range(5)}
        client.set_limits(LIMITED, max_running=2, create=True)
        grouped = set(client.enqueue_many(LIMITED, [{"g": n} for n in range(6)], group="g"))
        later = client.enqueue(Q, {"later": True}, delay_s=3600)
        [held] = claim_all(client, KEYED, most=1, lease_s=0.5)  # its worker dies
        [dying] = client.enqueue_many("rs-dead", [{}], max_attempts=1)
        [doomed] = claim_all(client, "rs-dead")
        client.nack(doomed, "boom")
        kept = client.enqueue("rs-results", {"r": 1})
        ack_keeping(client, claim_all(client, "rs-results"), [{"answer": 42}])

    status = reshard_with(kind, url, 64)
    assert (status.bucket_count, status.expression, status.phase) == (64, True, "done")
    assert layout_of(url) == (64, True, 1, "done")
    assert not has_bucket_column(url)
    assert indexes(url) >= {"tasks_claim_64", "tasks_leases_64", "tasks_head_starts_64"}
    assert not indexes(url) & {"tasks_pkey", "tasks_leases", "tasks_head_starts"}

    with shardq.Client(url) as client:
        assert client.bucket_count == 64
        claimed = claim_all(client, Q)
        assert {t.id for t in claimed} == plain  # each once, the scheduled one not yet
        client.ack_many(claimed)
        time.sleep(0.6)
        assert client.run_janitor_once().rescued == 1  # the dead worker's lease, by bucket
        assert info(client, held.id).state == "scheduled"  # back in line, after its backoff
        assert {t.id for t in claim_all(client, KEYED)} == keyed - {held.id}
        running = client.claim(LIMITED, limit=10)
        assert len(running) == 2
        assert {t.id for t in running} <= grouped
        assert [d.id for d in client.dead("rs-dead")] == [dying]
        assert client.result(kept).value == {"answer": 42}
        assert info(client, later).state == "scheduled"
        assert info(client, held.id).bucket == bucket_of(held.id, 64)
        client.ack_many(running)

    status = reshard_with(kind, url, 8)
    assert (status.bucket_count, status.generation, status.phase) == (8, 2, "done")
    assert not indexes(url) & {"tasks_claim_64", "tasks_leases_64", "tasks_head_starts_64"}
    with shardq.Client(url) as client:
        assert len(client.claim(LIMITED, limit=10)) == 2  # the rest of the group, in turn
        assert client.stats(Q)["scheduled"] == 1
        # The scheduled one, the held one in its backoff, the keyed and grouped ones
        # claimed and not acked, the dead one.
        assert scalar(url, "SELECT count(*) FROM shardq.tasks") == 1 + 1 + 4 + 4 + 1


def test_a_reshard_to_the_count_in_use_does_nothing(url: str) -> None:
    with shardq.Client(url) as client:
        status = client.reshard(16)
    assert (status.bucket_count, status.expression, status.generation) == (16, False, 0)
    assert has_bucket_column(url)
    assert "tasks_pkey" in indexes(url)


def advisory_locks(url: str) -> int:
    """How many advisory locks sessions of ``url``'s database hold."""
    return int(scalar(url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                           "AND granted AND database = (SELECT oid FROM pg_database "
                           "WHERE datname = current_database())"))


def test_rolled_back_before_the_switch_the_layout_is_as_it_was(url: str) -> None:
    stop, on_step, _ = until(lambda s: s.did == "built tasks_claim_64")
    with shardq.Client(url) as client:
        assert client.reshard(64, on_step=on_step, stop=stop).phase == "build"
        # Each call gives its lock back before it returns (stopped or refused), not as
        # its server session ends a moment after: the next call finds it free.
        assert not advisory_locks(url)
        with pytest.raises(shardq.ConfigError, match="a reshard to 64 buckets is under way: "
                           "run `shardq reshard --bucket-count 64` to finish it"):
            client.reshard(32)
        assert not advisory_locks(url)
        status = client.reshard(16)
    assert (status.bucket_count, status.generation, status.phase) == (16, 0, "done")
    assert not any(name.endswith("_64") for name in indexes(url))
    assert has_bucket_column(url)


def test_rolled_back_after_the_switch_it_switches_back(url: str) -> None:
    with shardq.Client(url) as client:
        client.enqueue_many(Q, [{"n": n} for n in range(50)])
        stop, on_step, _ = until(lambda s: s.switched)
        status = client.reshard(64, on_step=on_step, stop=stop)
        assert (status.bucket_count, status.phase) == (64, "switch")
        with pytest.raises(shardq.ConfigError, match="has switched: run `shardq reshard "
                           "--bucket-count 64` to finish it, or --bucket-count 16 to switch"):
            client.reshard(8)
        status = client.reshard(16)
        assert (status.bucket_count, status.expression, status.generation) == (16, False, 2)
        assert client.bucket_count == 16
        assert len(claim_all(client, Q)) == 50
    assert not any(name.endswith("_64") for name in indexes(url))
    assert "tasks_pkey" in indexes(url)
    assert has_bucket_column(url)


def test_a_second_reshard_is_refused_while_one_runs(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute(sqlfiles.plain("reshard_lock"))
        pid = holder.info.backend_pid
        with shardq.Client(url) as client, pytest.raises(
                shardq.ConfigError, match=f"another `shardq reshard` holds this schema's "
                                          rf"reshard lock \(server process {pid}, idle"):
            client.reshard(64)
    assert layout_of(url) == (16, False, 0, "done")


def test_claims_of_the_replaced_layout_run_until_it_is_retired(url: str) -> None:
    """After the switch a client that has not yet re-read the layout claims with the old
    one; once the old layout is being retired, such a claim takes nothing, and within
    LAYOUT_CHECK_S the client claims over the new buckets."""
    with shardq.Client(url) as client, shardq.Client(url) as stale:
        client.enqueue_many(Q, [{"n": n} for n in range(20)])
        old = stale.db.layout
        stop, on_step, _ = until(lambda s: s.switched)
        client.reshard(64, on_step=on_step, stop=stop)
        stale.db.layout_watch.due(old)  # its layout is pinned until its next re-read
        assert stale.db.layout == old
        assert len(stale.claim_bucket(Q, 0, limit=100)) > 0  # side by side
        stop, on_step, _ = until(lambda s: s.did.startswith("retiring"))
        client.reshard(64, on_step=on_step, stop=stop)
        stale.db.layout_watch.due(old)
        assert stale.bucket_count == 16
        assert sum(len(stale.claim_bucket(Q, b, limit=100)) for b in range(16)) == 0
        time.sleep(LAYOUT_CHECK_S)
        stale.workers()  # any call re-reads a layout a second old
        assert stale.bucket_count == 64
        assert 0 < len(claim_all(stale, Q)) < 20


def test_the_switch_waits_for_live_workers_on_the_old_generation(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.workers (id, name, host, pid, queues, started_at, "
                     "last_seen_at, generation) VALUES (gen_random_uuid(), 'old-worker', 'h', "
                     "1, '{q}', now(), now(), 0)")
        stop, on_step, seen = until(lambda s: s.did.startswith("waiting for 1 workers"))
        with shardq.Client(url) as client:
            status = client.reshard(64, on_step=on_step, stop=stop)
            assert status.phase == "switch"
            assert status.waiting_for == ["old-worker"]
            assert seen[-1].did == "waiting for 1 workers to claim with generation 1: old-worker"
            assert "tasks_pkey" in indexes(url)  # nothing of the old layout dropped
            conn.execute("UPDATE shardq.workers SET generation = 1")
            assert client.reshard(64).phase == "done"


def test_a_plain_insert_midway_is_claimed_on_the_new_layout(url: str) -> None:
    """A writer shardq does not control (Spark's JDBC writer, psql) computes no bucket."""
    stop, on_step, _ = until(lambda s: s.did == "built tasks_claim_64")
    with shardq.Client(url) as client:
        client.reshard(64, on_step=on_step, stop=stop)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO shardq.tasks (queue, payload) "
                         "SELECT %s, jsonb_build_object('n', g) FROM generate_series(1, 40) g",
                         (Q,))
        client.reshard(64)
        assert len(claim_all(client, Q)) == 40


def test_a_catalog_change_waits_for_its_lock_without_holding_up_producers(url: str) -> None:
    """A transaction that holds the table keeps the primary key's move from its ACCESS
    EXCLUSIVE lock: the move gives up after 200 ms and is tried again, and meanwhile
    an enqueue is never queued behind it."""
    with psycopg.connect(url, autocommit=True) as reader, shardq.Client(url) as client:
        # Up to the key's move: an open transaction would hold up the concurrent index
        # builds and drops before it too, which wait for older transactions to end.
        stop, on_step, _ = until(lambda s: s.did == "dropped tasks_head_starts")
        client.reshard(64, on_step=on_step, stop=stop)
        stop, on_step, seen = until(lambda s: s.contended and len(
            [x for x in seen if x.contended]) >= 3)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM shardq.tasks")  # ACCESS SHARE, held
        waits: list[float] = []
        done = threading.Event()

        def produce() -> None:
            with shardq.Client(url) as producer:
                while not done.is_set():
                    began = time.monotonic()
                    producer.enqueue(Q, {})
                    waits.append(time.monotonic() - began)
                    time.sleep(0.01)

        thread = threading.Thread(target=produce)
        thread.start()
        try:
            status = client.reshard(64, on_step=on_step, stop=stop)
        finally:
            done.set()
            thread.join()
        assert status.phase == "retire"
        assert next(s.did for s in seen if s.contended).startswith(
            "reshard_rekey: the table's lock was not granted within 200 ms")
        assert max(waits) < 1.0
        assert len(waits) > 10
        reader.execute("COMMIT")
        assert client.reshard(64).phase == "done"
        assert len(claim_all(client, Q)) == len(waits)


def test_the_backoff_of_a_contended_change_doubles_to_5_s() -> None:
    busy = Step("busy", contended=True)
    assert [reshard.pause_s(busy, n) for n in (1, 2, 3, 6, 9)] == [0.2, 0.4, 0.8, 5.0, 5.0]
    assert reshard.pause_s(Step("waiting", wait_s=0.5), 0) == 0.5


@pytest.fixture
def backlog(url: str) -> str:
    """``url`` with 20,000 tasks, which a reshard must keep whole."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.tasks (queue, payload) "
                     "SELECT %s, '{}' FROM generate_series(1, 20000)", (Q,))
    return url


def test_a_reshard_killed_mid_build_carries_on_when_run_again(backlog: str) -> None:
    """``kill -9`` while an index builds: once the killed process's server session is
    gone (at once, or when the statement it sent ends), the next run carries on from
    the row and the catalog, with every task there."""
    with psycopg.connect(backlog, autocommit=True) as old:
        # An open writer's lock, which a concurrent index build waits out before it
        # reads the table: the build is then surely under way, and its session busy,
        # when the process is killed.  (An old snapshot would be waited out only after
        # the table was read and the index built.)
        old.execute("BEGIN")
        old.execute("LOCK TABLE shardq.tasks IN ROW EXCLUSIVE MODE")
        proc = subprocess.Popen([sys.executable, "-m", "shardq", "reshard", "--bucket-count",
                                 "64", "--dsn", backlog], stdout=subprocess.DEVNULL)
        wait_for(lambda: scalar(backlog, "SELECT count(*) FROM pg_stat_progress_create_index "
                                         "WHERE datname = current_database()"),
                 timeout=60, what="an index build to begin")
        proc.kill()
        proc.wait()
        assert layout_of(backlog)[3] == "build"
        old.execute("COMMIT")
    wait_for(lambda: not advisory_locks(backlog), timeout=60,
             what="the killed reshard's session to end")
    out = shardq_cli("reshard", "--bucket-count", "64", "--dsn", backlog).stdout
    assert out.rstrip().endswith("64 buckets (generation 1)")
    assert scalar(backlog, "SELECT count(*) FROM shardq.tasks") == 20_000
    assert not query(backlog, "SELECT 1 FROM pg_index WHERE NOT indisvalid")
    with shardq.Client(backlog) as client:
        assert len(claim_all(client, Q, most=1000)) == 1000


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signalled_reshard_stops_after_its_step_and_carries_on_when_run_again(
        backlog: str, sig: signal.Signals) -> None:
    """SIGTERM or SIGINT while an index builds: the build ends, the command gives its lock
    back and exits 1 saying to run it again, and the next run finishes."""
    with psycopg.connect(backlog, autocommit=True) as old:
        old.execute("BEGIN")  # the build waits out this writer (see the test above)
        old.execute("LOCK TABLE shardq.tasks IN ROW EXCLUSIVE MODE")
        proc = subprocess.Popen([sys.executable, "-m", "shardq", "reshard", "--bucket-count",
                                 "64", "--dsn", backlog], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_for(lambda: scalar(backlog, "SELECT count(*) FROM pg_stat_progress_create_index "
                                         "WHERE datname = current_database()"),
                 timeout=60, what="an index build to begin")
        proc.send_signal(sig)
        time.sleep(0.5)  # the signal is taken while the build still waits
        old.execute("COMMIT")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert "; run the command again to carry on" in out.splitlines()[-1], out
    assert layout_of(backlog)[3] == "build"
    assert not advisory_locks(backlog)
    out = shardq_cli("reshard", "--bucket-count", "64", "--dsn", backlog).stdout
    assert out.rstrip().endswith("64 buckets (generation 1)")
    assert scalar(backlog, "SELECT count(*) FROM shardq.tasks") == 20_000


def test_a_reshard_whose_connection_is_lost_carries_on_when_run_again(backlog: str) -> None:
    """The reshard's session ends while an index builds (a lost connection): the build
    is cancelled and leaves its index INVALID, and the next run drops it, builds it
    again and finishes."""
    ended: list[int] = []
    holder = psycopg.connect(backlog, autocommit=True)

    def cut() -> None:  # end the session that builds the lease index
        def building() -> list[tuple[Any, ...]]:
            # The session itself, not a parallel worker of its build: those show the
            # same statement, and may have finished when the signal reaches them.
            return query(backlog, "SELECT pid FROM pg_stat_activity WHERE query LIKE "
                                  "'%CREATE INDEX CONCURRENTLY \"tasks_leases_64\"%' "
                                  "AND backend_type = 'client backend' "
                                  "AND pid <> pg_backend_pid() "
                                  "AND datname = current_database()")
        try:
            wait_for(lambda: bool(building()), timeout=60, what="the second index build")
            ended.extend(r[0] for r in building())
            query(backlog, "SELECT pg_terminate_backend(%s)", (ended[0],))
        finally:  # the build waits for this lock: a failure here must not hang the test
            holder.execute("COMMIT")

    seen: list[str] = []
    cutter = threading.Thread(target=cut)

    def on_step(step: Step) -> None:
        seen.append(step.did)
        if step.did == "built tasks_claim_64":
            # An open writer's lock that the next build waits out, once its index is
            # in the catalog, while its session is ended.
            holder.execute("BEGIN")
            holder.execute("LOCK TABLE shardq.tasks IN ROW EXCLUSIVE MODE")
            cutter.start()

    with holder, shardq.Client(backlog) as client:
        with pytest.raises(shardq.DatabaseError):
            client.reshard(64, on_step=on_step)
        cutter.join()
        assert seen[-1] == "built tasks_claim_64"
        assert len(ended) == 1
        assert query(backlog, "SELECT c.relname FROM pg_index i JOIN pg_class c "
                              "ON c.oid = i.indexrelid WHERE NOT i.indisvalid") == [
            ("tasks_leases_64",)]
        steps: list[str] = []
        assert client.reshard(64, on_step=lambda step: steps.append(step.did)).phase == "done"
        assert steps[:2] == ["dropped tasks_leases_64, left invalid by an interrupted build",
                             "built tasks_leases_64"]
    assert scalar(backlog, "SELECT count(*) FROM shardq.tasks") == 20_000
    assert not query(backlog, "SELECT 1 FROM pg_index WHERE NOT indisvalid")


def test_the_cli_reshards_and_shows_the_layout(url: str) -> None:
    status = shardq_cli("reshard", "--status", "--dsn", url).stdout
    assert status == "16 buckets (generation 0, as created)\n"
    out = shardq_cli("reshard", "--bucket-count", "32", "--dsn", url).stdout
    lines = out.splitlines()
    assert lines[0].endswith(" building the indexes of 32 buckets")
    assert lines[-1] == "32 buckets (generation 1)"
    assert shardq_cli("stats", "--dsn", url).stdout.endswith(
        "buckets: 32 buckets (generation 1)\n")
    as_json = shardq_cli("reshard", "--status", "--json", "--dsn", url).stdout
    assert '"bucket_count": 32, "expression": true, "generation": 1, "phase": "done"' in as_json


def test_the_cli_refuses_in_one_line(url: str) -> None:
    one_line_error(shardq_cli("reshard", "--dsn", url, check=False),
                   "reshard needs --bucket-count N, or --status")
    one_line_error(shardq_cli("reshard", "--bucket-count", "0", "--dsn", url, check=False),
                   "--bucket-count")
    one_line_error(shardq_cli("reshard", "--bucket-count", "2000", "--dsn", url, check=False),
                   "--bucket-count")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE shardq.layout SET phase = 'build', target = 64")
    one_line_error(shardq_cli("reshard", "--bucket-count", "8", "--dsn", url, check=False),
                   "a reshard to 64 buckets is under way")
    status = shardq_cli("reshard", "--status", "--dsn", url).stdout
    assert status.startswith("16 buckets (generation 0, as created); reshard to 64 "
                             "buckets: building its indexes")


def test_a_resharded_schema_refuses_to_go_below_the_layouts_revision(url: str) -> None:
    with shardq.Client(url) as client:
        client.reshard(32)
    with pytest.raises(Exception, match="this schema was resharded"):
        migrate.downgrade(url, revision="0028")
    assert layout_of(url) == (32, True, 1, "done")  # nothing was dropped


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
def test_a_client_idle_through_a_reshard_works_at_its_next_call(url: str, kind: str) -> None:
    """A client that sent nothing while the layout changed under it (a web process that
    enqueues now and then) reads the layout again before it composes its next call: its
    enqueue does not name the dropped column, its claim takes the new layout's tasks."""
    # Each bucket is claimed from (a claim takes from one bucket): the task enqueued
    # before the reshard and the one after it are both taken, on the new layout.
    async def calls(client: shardq.AsyncClient) -> tuple[int, list[int]]:
        await client.enqueue(Q, {"n": 1})
        got: list[shardq.Task] = []
        for bucket in range(client.bucket_count):
            got += await client.claim_bucket(Q, bucket, limit=10)
        return client.bucket_count, sorted(t.payload["n"] for t in got)

    if kind == "Client":
        with shardq.Client(url) as idle:
            idle.enqueue(Q, {"n": 0})
            reshard_with("Client", url, 64)
            idle.enqueue(Q, {"n": 1})
            drained = sorted(t.payload["n"] for t in claim_all(idle, Q))
            assert (idle.bucket_count, drained) == (64, [0, 1])
        return

    async def run() -> tuple[int, list[int]]:
        async with shardq.AsyncClient(url) as idle:
            await idle.enqueue(Q, {"n": 0})
            await asyncio.to_thread(reshard_with, "Client", url, 64)
            return await calls(idle)

    assert asyncio.run(run()) == (64, [0, 1])
