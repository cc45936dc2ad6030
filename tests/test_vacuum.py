"""Migration 0014's settings and the janitor's vacuum step, against a real database."""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import shardq
from shardq.cli import doctor
from shardq.core import migrate
from shardq.core.config import ClientConfig, load
from shardq.loops.vacuum import LOCK_KEY, MAINTAIN_SINCE, Vacuumer
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.conftest import Databases
from tests.helpers import live_rows_counted, wait_for

pytestmark = pytest.mark.server

Conn = psycopg.Connection[Any]


def reloptions(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT reloptions FROM pg_class "
                           "WHERE oid = 'shardq.tasks'::regclass").fetchone()
    assert row is not None
    return dict(option.split("=", 1) for option in row[0] or [])


def table_stats(url: str) -> tuple[int, int]:
    """(n_dead_tup, vacuum_count) of shardq.tasks."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT n_dead_tup, vacuum_count FROM pg_stat_user_tables "
                           "WHERE relid = 'shardq.tasks'::regclass").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def make_dead(url: str, n: int) -> None:
    """``n`` dead rows in shardq.tasks: tasks inserted and deleted, as acks leave them.
    The connection closes at the end, which flushes its statistics."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.tasks (queue, payload) "
                     "SELECT 'dead', '{}' FROM generate_series(1, %s)", (n,))
        conn.execute("DELETE FROM shardq.tasks WHERE queue = 'dead'")


def advisory_locks(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                           "database = (SELECT oid FROM pg_database "
                           "WHERE datname = current_database())").fetchone()
    return int(row[0]) if row else 0


class Clock:
    """Seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_migration_sets_and_downgrade_restores_the_settings(databases: Databases) -> None:
    url = databases.create()
    options = reloptions(url)
    assert options["autovacuum_vacuum_scale_factor"] == "0"
    assert options["autovacuum_vacuum_threshold"] == "1000"
    assert options["autovacuum_vacuum_insert_threshold"] == "1000"
    assert options["autovacuum_vacuum_cost_delay"] == "0"
    assert options["vacuum_truncate"] == "false"
    migrate.downgrade(url, revision="0013")
    options = reloptions(url)
    assert options["autovacuum_vacuum_threshold"] == "5000"  # revision 0002's values
    assert options["autovacuum_vacuum_insert_threshold"] == "20000"
    assert "vacuum_truncate" not in options
    migrate.upgrade(url, output=io.StringIO())
    assert reloptions(url)["vacuum_truncate"] == "false"


def test_settings_come_from_the_environment_and_flags() -> None:
    config = load(ClientConfig, environ={"SHARDQ_VACUUM": "off",
                                         "SHARDQ_VACUUM_DEAD_ROWS": "20000"})
    assert not config.vacuum
    assert config.vacuum_dead_rows == 20000
    with pytest.raises(shardq.ConfigError, match="vacuum_interval_s"):
        ClientConfig(vacuum_interval_s=0)


def test_vacuums_past_the_threshold_and_not_before(quiet: str) -> None:
    with shardq.Client(quiet, vacuum_dead_rows=1000, reindex_bloat_ratio=0) as client:
        step = Vacuumer(client)
        make_dead(quiet, 600)
        wait_for(lambda: table_stats(quiet)[0] >= 600, what="the dead rows in the statistics")
        report = step.run_once()
        assert report.dead_rows is not None
        assert report.dead_rows >= 600
        assert not report.vacuumed
        assert report.skipped is None
        assert table_stats(quiet)[1] == 0
        make_dead(quiet, 600)
        wait_for(lambda: table_stats(quiet)[0] >= 1200, what="more dead rows")
        report = step.run_once()
        assert report.vacuumed
        wait_for(lambda: table_stats(quiet) == (0, 1), what="the vacuum in the statistics")


def test_one_janitor_at_a_time(quiet: str) -> None:
    with shardq.Client(quiet, vacuum_dead_rows=100, reindex_bloat_ratio=0) as client, \
            psycopg.connect(quiet, autocommit=True) as other:
        make_dead(quiet, 200)
        wait_for(lambda: table_stats(quiet)[0] >= 200, what="the dead rows in the statistics")
        other.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))  # another janitor's turn
        report = Vacuumer(client).run_once()
        assert not report.vacuumed
        assert report.skipped == "another janitor holds the vacuum lock"
        other.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        assert Vacuumer(client).run_once().vacuumed


def test_a_bloated_index_is_rebuilt_smaller(quiet: str) -> None:
    with psycopg.connect(quiet, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.tasks (queue, payload) "
                     "SELECT 'bloat', '{}' FROM generate_series(1, 100000)")
        conn.execute("DELETE FROM shardq.tasks WHERE random() < 0.99")
        conn.execute("VACUUM ANALYZE shardq.tasks")  # the pages stay; the entries are few
        live_rows_counted(conn, 10_000)
    clock = Clock()
    with shardq.Client(quiet, reindex_min_bytes=1024 * 1024, reindex_interval_s=60) as client:
        step = Vacuumer(client, clock=clock)
        first = step.run_once()
        assert len(first.reindexed) == 1  # the worst one, one per step
        rebuilt = first.reindexed[0]
        assert rebuilt.bytes_after < rebuilt.bytes_before / 4
        with psycopg.connect(quiet) as conn:
            size = conn.execute("SELECT pg_relation_size(%s::regclass), indisvalid FROM pg_index "
                                "WHERE indexrelid = %s::regclass",
                                (f"shardq.{rebuilt.index}",) * 2).fetchone()
        assert size == (rebuilt.bytes_after, True)
        clock.now += 59  # the next check is not due yet
        assert step.run_once().reindexed == ()
        clock.now += 1
        second = step.run_once().reindexed
        assert len(second) == 1
        assert second[0].index != rebuilt.index


def test_an_interrupted_rebuild_leaves_nothing_behind(quiet: str) -> None:
    with psycopg.connect(quiet, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.tasks (queue, payload) VALUES ('a', '{}'), ('a', '{}')")
        with pytest.raises(psycopg.errors.UniqueViolation):  # as a REINDEX cut short leaves it
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY tasks_ids_ccnew "
                         "ON shardq.tasks (queue)")
    with shardq.Client(quiet) as client:
        assert Vacuumer(client).run_once().dropped == ("tasks_ids_ccnew",)
    with psycopg.connect(quiet) as conn:
        assert conn.execute("SELECT to_regclass('shardq.tasks_ids_ccnew')").fetchone() == (None,)


@pytest.fixture
def tenant(quiet: str) -> Iterator[tuple[str, str]]:
    """(DSN, role) of a role that may use shardq's tables but does not own them."""
    role = f"shardq_tenant_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(quiet, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA shardq TO {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
                             "shardq TO {}").format(sql.Identifier(role)))
    yield make_conninfo(quiet, user=role), role
    with psycopg.connect(quiet, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_role_that_does_not_own_the_table_is_told_once(
        quiet: str, tenant: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    dsn, role = tenant
    make_dead(quiet, 200)
    wait_for(lambda: table_stats(quiet)[0] >= 200, what="the dead rows in the statistics")
    with shardq.Client(dsn, vacuum_dead_rows=100) as client, \
            caplog.at_level(logging.WARNING, logger="shardq"):
        step = Vacuumer(client)
        reports = [step.run_once(), step.run_once()]
        for report in reports:
            assert not report.vacuumed
            assert report.skipped is not None
            assert report.skipped.startswith(f"role {role} may not VACUUM or REINDEX "
                                             "shardq.tasks (owned by ")
            assert "GRANT MAINTAIN ON shardq.tasks" in report.skipped
        assert [r.message for r in caplog.records].count(
            f"shardq-vacuum: {reports[0].skipped}") == 1
        found = {f.check: f for f in doctor.examine(client, WorkerConfig())}
        assert not found["janitor vacuum"].ok
        assert "GRANT MAINTAIN" in found["janitor vacuum"].advice
        with psycopg.connect(quiet) as conn:
            version = conn.execute("SHOW server_version_num").fetchone()
        if version is None or int(version[0]) < MAINTAIN_SINCE:
            return
        with psycopg.connect(quiet, autocommit=True) as conn:
            conn.execute(sql.SQL("GRANT MAINTAIN ON shardq.tasks TO {}").format(
                sql.Identifier(role)))
        assert step.run_once().vacuumed  # PostgreSQL 17+: MAINTAIN is enough


def test_a_worker_with_janitors_runs_the_step_unless_turned_off(dsn: str) -> None:
    app = shardq.App(dsn)
    app.task(queue="q")(lambda: None)
    # A janitor, its vacuum step and the flows' resolver beside it.
    assert WorkerConfig(janitors=1).connections == WorkerConfig(janitors=0).connections + 3
    for vacuum, janitors, steps in ((True, 1, 1), (False, 1, 0), (True, 0, 0)):
        worker = Worker(app, ClientConfig(dsn=dsn, vacuum=vacuum),
                        WorkerConfig(janitors=janitors, listen=False))
        try:
            assert len(worker.vacuumers) == steps
        finally:
            worker.client.close()


def test_a_step_cut_short_backs_off(quiet: str) -> None:
    clock = Clock()
    # Every index counts as bloated (an empty one is one page: ratio 1 > 0.5).
    with shardq.Client(quiet, reindex_bloat_ratio=0.5, reindex_min_bytes=0,
                       statement_timeout_s=0.5, vacuum_interval_s=1) as client, \
            psycopg.connect(quiet) as blocker:
        step = Vacuumer(client, clock=clock)
        blocker.execute("LOCK TABLE shardq.tasks IN SHARE UPDATE EXCLUSIVE MODE")
        report = step.run_once()  # the REINDEX waits for the lock until it is cut
        assert report.reindexed == ()
        assert report.skipped is not None
        assert report.skipped.endswith("the next in 8 s")
        blocker.rollback()
        # The cut connection's server process goes on until the REINDEX it was waiting to
        # run is over, and only then finds its client gone and lets the lock go.
        wait_for(lambda: not advisory_locks(quiet), what="the cut session's lock to go")
        clock.now += 7
        assert step.run_once().skipped == report.skipped  # still waiting
        clock.now += 1
        again = step.run_once()
        assert again.skipped is None
        assert len(again.reindexed) == 1
