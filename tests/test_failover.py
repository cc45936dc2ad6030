"""A primary failover with nothing lost, on a real two-node cluster (pg_auto_failover).

Producers and two ``shardq consume`` workers reach the cluster through one multi-host
URL (``target_session_attrs=read-write``).  The primary is killed (``kill -9`` of the
node: keeper and postmaster) in the middle of a drain, with the producers running; the
standby, synchronously replicated, is promoted.  Nothing is restarted: producers and
workers find the new primary on their own.  Then the killed node rejoins as the
standby, and a planned switchover moves the primary back under the same load.

Runs are logged outside the cluster (:mod:`tests.apps.failover`).  Each test prints
its figures (``pytest -s``).  Needs pg_auto_failover (``apt-get install
postgresql-15-auto-failover``); marked ``failover``, so ``pytest -m failover
tests/test_failover.py`` runs it.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import psycopg
import pytest

import shardq
from shardq.core import migrate
from tests import failover_cluster
from tests.apps import failover
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.failover_cluster import Cluster
from tests.failover_load import (
    CLAIM_LOST,
    Producers,
    Runs,
    longest_gap_s,
    rate_back_s,
    summary,
    ticks,
    twice,
    why_twice,
)
from tests.helpers import query, wait_for

pytestmark = [
    pytest.mark.failover,
    pytest.mark.timeout(400),
    pytest.mark.skipif(failover_cluster.missing() is not None,
                       reason=str(failover_cluster.missing())),
]

LEASE_S = "10"  # longer than a failover here: a task held across it keeps its lease
DAEMON_ARGS = ("--concurrency", "4", "--lease-s", LEASE_S, "--janitor-interval-s", "0.5",
               "--shutdown-grace-s", "5",
               "--connect-timeout-s", "2", "--statement-timeout-s", "3")
STEADY_S = 6.0  # load before the fault
AFTER_S = 12.0  # load after the cluster is writable again
CAPPED_TASKS, MAX_RUNNING = 120, 2


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    try:
        made.start()
        migrate.upgrade(made.dsn(), output=open("/dev/null", "w"))  # noqa: SIM115
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def runs(databases: Databases) -> Runs:
    log_dsn = databases.create(migrated=False)
    with psycopg.connect(log_dsn, autocommit=True) as conn:
        conn.execute(failover.SETUP)
    return Runs(log_dsn)


@pytest.fixture
def client(cluster: Cluster) -> Iterator[shardq.Client]:
    """A client of the cluster, on its multi-host URL."""
    with shardq.Client(cluster.dsn()) as made:
        yield made


@pytest.fixture
def load(cluster: Cluster) -> Iterator[Callable[[], Producers]]:
    """Starts the producers on the cluster's multi-host URL; stops them after."""
    started: list[Producers] = []

    def start() -> Producers:
        started.append(Producers(cluster.dsn()).start())
        return started[-1]

    yield start
    for p in started:
        p.stop()


@pytest.fixture
def workers(cluster: Cluster, runs: Runs) -> Iterator[Callable[[], list[Daemon]]]:
    """Starts two workers of the app on the cluster's multi-host URL; stops them after."""
    started: list[Daemon] = []

    def start() -> list[Daemon]:
        env = {**_base_env(), "SHARDQ_DSN": cluster.dsn(), "FAILOVER_LOG_DSN": runs.log_dsn}
        started.extend(Daemon(env, "tests.apps.failover:app", *DAEMON_ARGS) for _ in range(2))
        for d in started:
            wait_for(functools.partial(d.saw, "consuming"), 60, what="a worker to start")
        return started

    yield start
    for d in started:
        d.kill()


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SHARDQ_")}


def _wait_drained(cluster: Cluster, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while _left(cluster) != 0:
        if time.monotonic() > deadline:
            left = query(cluster.dsn(), "SELECT queue, status, times_claimed, count(*) "
                         "FROM shardq.tasks GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
            raise AssertionError(f"not drained in {timeout_s:.0f} s: {left}")
        time.sleep(0.2)


def _left(cluster: Cluster) -> int:
    try:
        return int(query(cluster.dsn(), "SELECT count(*) FROM shardq.tasks "
                         "WHERE queue <> %s", (failover.TICKS,))[0][0])
    except psycopg.Error:
        return -1


def _stop(daemons: list[Daemon]) -> None:
    for d in daemons:
        d.signal(signal.SIGTERM)
    for d in daemons:
        code, out = d.wait(30)
        assert code == 0, out[-3000:]


def test_kill_the_primary_mid_drain(cluster: Cluster, runs: Runs, client: shardq.Client,
                                    workers: Callable[[], list[Daemon]],
                                    load: Callable[[], Producers]) -> None:
    client.set_limits(failover.CAPPED, max_running=MAX_RUNNING, create=True)
    daemons = workers()
    producers = load()
    time.sleep(STEADY_S)
    client.enqueue_many(failover.CAPPED, [{"task": failover.capped.name, "args": [n],
                                           "kwargs": {}} for n in range(CAPPED_TASKS)])
    wait_for(lambda: client.limits(failover.CAPPED).running == MAX_RUNNING, 30,
             what="the capped queue to run at its limit")
    old = cluster.primary()
    killed_at = time.time()
    cluster.kill(old)
    wait_for(lambda: _writable(cluster), 60, 0.05, "a writable primary")
    writable_s = time.time() - killed_at
    time.sleep(AFTER_S)
    producers.stop()
    stopped_at = time.time()
    _wait_drained(cluster)
    idle_at = time.time()

    # Each worker's listener reconnected: it LISTENs on the new primary.
    listening = query(cluster.dsn(), "SELECT count(*) FROM pg_stat_activity "
                      "WHERE query LIKE %s", ('%LISTEN "shardq"%',))[0][0]
    limit_after = client.limits(failover.CAPPED)
    _stop(daemons)

    ran = runs.all(failover.QUEUE)
    enqueued = producers.numbers
    ran_numbers = {r.n for r in ran}
    dup = twice(ran)
    reasons = [why_twice(rs) for rs in dup.values()]
    capped = runs.all(failover.CAPPED)
    slots = ticks(runs.all(failover.TICKS))
    steady, back_s = rate_back_s(ran, killed_at)
    print("\nkill -9 of the primary:", summary(
        primary_killed=old, enqueued=len(enqueued), failed_enqueue_calls=len(
            producers.failures), runs=len(ran), twice=len(dup),
        why={r: reasons.count(r) for r in set(reasons)}, writable_after_s=writable_s,
        enqueues_paused_s=longest_gap_s(producers.returned_at, killed_at, stopped_at),
        runs_paused_s=longest_gap_s([r.at for r in ran], killed_at, stopped_at),
        steady_runs_per_s=steady, full_rate_after_s=back_s, drained_after_s=idle_at
        - killed_at, listeners=listening,
        capped_twice=len(twice(capped)), ticks=len(slots)))
    assert enqueued - ran_numbers == set(), "enqueues that returned but never ran"
    # The same producers and workers went on on the new primary, with no restart.
    assert producers.returned_at[-1] > killed_at + writable_s, "the producers did not resume"
    assert back_s != float("inf"), "the workers never ran at their rate again"
    assert CLAIM_LOST not in reasons, "an acknowledged claim was lost in the failover"
    assert {r.n for r in capped} == set(range(CAPPED_TASKS))
    assert limit_after.running == 0, "a place of the capped queue stayed taken"
    assert listening == 2, "each worker LISTENs on the new primary"
    _assert_each_slot_once(slots)


def _writable(cluster: Cluster) -> bool:
    try:
        with psycopg.connect(cluster.dsn(), connect_timeout=2, autocommit=True) as conn:
            conn.execute("SELECT txid_current()")
    except psycopg.Error:
        return False
    return True


def _assert_each_slot_once(slots: dict[str, set[str]]) -> None:
    """Every second from the first slot to the last fired once (one task per slot)."""
    assert slots, "no periodic slot ran"
    assert all(len(tasks) == 1 for tasks in slots.values()), "a slot fired twice"
    seconds = sorted(int(datetime.fromisoformat(s).timestamp()) for s in slots)
    assert seconds == list(range(seconds[0], seconds[-1] + 1)), "a slot was skipped"


def test_planned_switchover(cluster: Cluster, runs: Runs, workers: Callable[[], list[Daemon]],
                            load: Callable[[], Producers]) -> None:
    runs.clear()
    cluster.rejoin_all()  # the node killed by the test before
    daemons = workers()
    producers = load()
    time.sleep(STEADY_S)
    old = cluster.primary()
    started = time.time()
    cluster.switchover()
    switched_s = time.time() - started
    time.sleep(AFTER_S)
    producers.stop()
    stopped_at = time.time()
    _wait_drained(cluster)
    _stop(daemons)

    ran = runs.all(failover.QUEUE)
    dup = twice(ran)
    steady, back_s = rate_back_s(ran, started)
    print("\nswitchover:", summary(
        from_=old, to=cluster.primary(), switchover_s=switched_s, enqueued=len(
            producers.numbers), failed_enqueue_calls=len(producers.failures),
        runs=len(ran), twice=len(dup), why=[why_twice(rs) for rs in dup.values()],
        enqueues_paused_s=longest_gap_s(producers.returned_at, started, stopped_at),
        runs_paused_s=longest_gap_s([r.at for r in ran], started, stopped_at),
        steady_runs_per_s=steady, full_rate_after_s=back_s))
    assert cluster.primary() != old
    assert producers.numbers - {r.n for r in ran} == set()
    assert producers.returned_at[-1] > started + switched_s, "the producers did not resume"
    assert back_s != float("inf"), "the workers never ran at their rate again"
    assert CLAIM_LOST not in {why_twice(rs) for rs in dup.values()}
