"""A claim under a limit whose reply is lost: the server took the tasks and gave them
capacity slots, the client never heard.  Its retry must find them by the claim's lease
token (not take others, nor leave these held until their lease runs out), and the limit
must hold throughout.  A worker's plain claim of several buckets recovers the same way.

The claim statement runs through the fault proxy, which lets it reach the server and
commit, then drops its reply and closes the connection (``withhold_reply``).  The
schema has one bucket, so one claim can take as many tasks as the limit allows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core import migrate
from tests.apps import limited
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.daemons import Daemon
from tests.helpers import query, scalar, wait_for

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent.parent
LIMITED_CLAIM = rb"f AS MATERIALIZED"  # claim_limited.sql, and no other statement


@pytest.fixture
def one_bucket(chaos_pg: ThrowawayPostgres) -> str:
    """A fresh database of one bucket on the chaos server (its name), with
    tests.apps.limited's observer table."""
    name = chaos_pg.create_database(migrated=False)
    with open(os.devnull, "w") as sink:
        migrate.upgrade(chaos_pg.url(name), bucket_count=1, output=sink)
    with psycopg.connect(chaos_pg.url(name), autocommit=True) as conn:
        conn.execute(limited.SETUP)
    return name


@pytest.fixture
def client(proxy: Proxy, one_bucket: str) -> Iterator[shardq.Client]:
    """A client on ``one_bucket`` through the proxy."""
    with shardq.Client(proxy.url(one_bucket)) as c:
        yield c


def held(url: str, queue: str) -> list[tuple[Any, ...]]:
    """(lease token, slot, group slot) of each task of ``queue`` that the database holds."""
    return query(url, "SELECT lease_token, slot, group_slot FROM shardq.tasks "
                      "WHERE queue = %s AND status = 'locked' ORDER BY slot", [queue])


def test_the_proxy_withholds_a_statement_prepared_at_its_first_run(
        chaos_pg: ThrowawayPostgres, one_bucket: str, proxy: Proxy) -> None:
    """The workers' connections prepare each statement at its first run (a Parse in a
    round trip of its own, then the Bind that runs it): the reply withheld is the run's,
    so the statement did run."""
    url = chaos_pg.url(one_bucket)
    with psycopg.connect(url, autocommit=True) as direct:
        direct.execute("CREATE TABLE counted (n int); INSERT INTO counted VALUES (0)")
    conn = psycopg.connect(proxy.url(one_bucket), autocommit=True, prepare_threshold=0)
    proxy.withhold_reply(rb"UPDATE counted", times=1)
    with pytest.raises(psycopg.OperationalError):
        conn.execute("UPDATE counted SET n = n + 1")
    conn.close()
    assert len(proxy.withheld) == 1
    assert scalar(url, "SELECT n FROM counted") == 1


def test_a_turn_whose_claim_reply_was_lost_recovers_its_tasks_by_lease_token(
        chaos_pg: ThrowawayPostgres, one_bucket: str, proxy: Proxy,
        client: shardq.Client) -> None:
    url = chaos_pg.url(one_bucket)
    client.set_limits("lost", max_running=4, create=True)
    ids = client.enqueue_many("lost", [{"n": n} for n in range(10)])
    control = client.limits("lost")
    proxy.withhold_reply(LIMITED_CLAIM, times=1)
    turn = client.claim_turn("lost", 0, after=None, control=control, limit=10)
    assert len(proxy.withheld) == 1  # the fault happened: the claim's reply was lost
    # The retry returned what the lost attempt took: four tasks, one lease token.
    assert len(turn.tasks) == 4
    [token] = {t.lease_token for t in turn.tasks}
    assert held(url, "lost") == [(token, slot, None) for slot in (1, 2, 3, 4)]
    assert {t.id for t in turn.tasks} <= set(ids)
    assert all(t.attempts == 1 for t in turn.tasks)
    # The limit holds: nothing more is claimed until a task is settled.
    again = client.claim_turn("lost", 0, after=None, control=control, limit=10)
    assert again.tasks == []
    assert client.limits("lost").running == 4
    client.ack(turn.tasks[0])
    [one] = client.claim_turn("lost", 0, after=None, control=control, limit=10).tasks
    assert client.limits("lost").running == 4
    assert one.id not in {t.id for t in turn.tasks}


def test_a_claim_whose_reply_was_lost_recovers_its_tasks_by_lease_token(
        chaos_pg: ThrowawayPostgres, one_bucket: str, proxy: Proxy,
        client: shardq.Client) -> None:
    """``Client.claim`` (a plain claim first, then the queue's turns) after a lost reply."""
    url = chaos_pg.url(one_bucket)
    client.set_limits("lost", max_running=4, create=True)
    client.enqueue_many("lost", [{"n": n} for n in range(10)])
    proxy.withhold_reply(LIMITED_CLAIM, times=1)
    tasks = client.claim("lost", limit=10)
    assert len(proxy.withheld) == 1
    assert len(tasks) == 4
    [token] = {t.lease_token for t in tasks}
    assert held(url, "lost") == [(token, slot, None) for slot in (1, 2, 3, 4)]


def test_an_ack_and_claim_whose_commit_reply_was_lost_keeps_both(
        chaos_pg: ThrowawayPostgres, one_bucket: str, proxy: Proxy,
        client: shardq.Client) -> None:
    """``ack_and_claim``'s transaction committed, and the reply to its COMMIT was lost:
    the retry finds the acked task gone (settled) and collects the successor its claim
    took by the lease token, so neither the outcome nor the new task is lost, and the
    limit holds."""
    url = chaos_pg.url(one_bucket)
    client.set_limits("lost", max_running=2, create=True)
    client.enqueue_many("lost", [{"n": n} for n in range(6)])
    control = client.limits("lost")
    first, second = client.claim_turn("lost", 0, after=None, control=control, limit=2).tasks
    proxy.withhold_commit(LIMITED_CLAIM, times=1)
    handed = client.ack_and_claim([first], "lost", 0, control=control, limit=2)
    assert proxy.pending_commits == 0  # the fault happened
    assert handed.lost == []
    [successor] = handed.turn.tasks
    assert client.get(first.id) is None
    rows = held(url, "lost")
    assert sorted(token for token, _, _ in rows) == sorted(
        [second.lease_token, successor.lease_token])
    assert sorted(slot for _, slot, _ in rows) == [1, 2]
    assert successor.attempts == 1  # claimed once: recovered, not claimed again


def test_a_group_turn_that_took_its_groups_last_tasks_recovers_them_after_a_lost_reply(
        chaos_pg: ThrowawayPostgres, one_bucket: str, proxy: Proxy,
        client: shardq.Client) -> None:
    """A group's turn whose claim takes the group's last waiting tasks: when it is retried,
    the next group is first in line, and the lost claim's tasks must still come back."""
    url = chaos_pg.url(one_bucket)
    client.set_limits("lost", max_running_per_group=3, create=True)
    client.enqueue_many("lost", [{"n": n} for n in range(2)], group="a")
    client.enqueue_many("lost", [{"n": n} for n in range(2, 6)], group="b")
    control = client.limits("lost")
    assert control.grouped
    proxy.withhold_reply(LIMITED_CLAIM, times=1)
    turn = client.claim_turn("lost", 0, after="", control=control, limit=10)
    assert len(proxy.withheld) == 1
    # The retry returned group a's two tasks, which the lost claim took; nothing else
    # was claimed, and each holds a slot of its group.
    assert sorted(t.payload["n"] for t in turn.tasks) == [0, 1]
    [token] = {t.lease_token for t in turn.tasks}
    rows = held(url, "lost")
    assert [(t, slot) for t, slot, _ in rows] == [(token, None), (token, None)]
    assert len({group_slot for _, _, group_slot in rows} & {1, 2, 3}) == 2


def test_a_rated_turn_recovers_its_tasks_after_a_lost_reply_though_the_rate_is_spent(
        chaos_pg: ThrowawayPostgres, one_bucket: str, proxy: Proxy,
        client: shardq.Client) -> None:
    """Under a rate, the retry finds the tokens spent by the lost claim: it must still
    return what that claim took, not an empty turn."""
    url = chaos_pg.url(one_bucket)
    client.set_limits("lost", max_running=8, rate=shardq.Rate(10, 60.0, burst=5), create=True)
    client.enqueue_many("lost", [{"n": n} for n in range(10)])
    control = client.limits("lost")
    proxy.withhold_reply(LIMITED_CLAIM, times=1)
    turn = client.claim_turn("lost", 0, after=None, control=control, limit=10)
    assert len(proxy.withheld) == 1
    rows = held(url, "lost")
    assert len(rows) == 4  # the burst of 5, claimed as a batch of 4
    assert sorted(t.lease_token for t in turn.tasks) == [token for token, _, _ in rows]


def test_a_fleet_behind_a_lost_claim_reply_keeps_the_limit_and_runs_each_task_once(
        chaos_pg: ThrowawayPostgres, one_bucket: str, proxy: Proxy) -> None:
    """Three workers claim through the proxy; one limited claim's reply is lost.  The
    handlers log straight to the server: no more than the limit at once, every task run
    once, at its first attempt (the retry recovered the claim: nothing waited for a
    lease to run out)."""
    url = chaos_pg.url(one_bucket)
    with shardq.Client(url) as direct:
        direct.set_limits("capped", max_running=4, create=True)
        limited.app.use_client(direct)
        limited.capped.enqueue_many([(n, 0.1) for n in range(40)])
    proxy.withhold_reply(LIMITED_CLAIM, times=1)
    env = {**os.environ, "SHARDQ_DSN": proxy.url(one_bucket), "LIMITED_LOG_DSN": url,
           "PYTHONPATH": str(ROOT)}
    daemons = [Daemon(env, "tests.apps.limited:app", "--queue", "capped", "--concurrency",
                      "16", "--no-sample-stats") for _ in range(3)]
    try:
        wait_for(lambda: scalar(url, "SELECT count(*) = 0 FROM shardq.tasks"), timeout=60,
                 what="the queue to drain")
    finally:
        for d in daemons:
            d.kill()
    assert len(proxy.withheld) == 1
    runs = query(url, "SELECT n, claims, extract(epoch FROM started_at)::float8, "
                      "extract(epoch FROM ended_at)::float8 FROM limited_runs")
    assert sorted(n for n, *_ in runs) == list(range(40))
    assert {claims for _, claims, _, _ in runs} == {1}
    events = sorted([(s, 1) for _, _, s, _ in runs] + [(e, -1) for _, _, _, e in runs])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    assert 1 < most <= 4



def test_a_claim_of_several_buckets_whose_reply_was_lost_recovers_its_tasks(
        chaos_pg: ThrowawayPostgres, proxy: Proxy) -> None:
    """A worker's claim of the buckets a burst of notes named (claim_buckets), its reply
    lost after the server committed: the retry collects what it took by the lease token,
    from every bucket listed, and leaves the rest."""
    name = chaos_pg.create_database()  # 16 buckets
    url = chaos_pg.url(name)
    with shardq.Client(proxy.url(name)) as client:
        client.enqueue_many("lost", [{"n": n} for n in range(64)])
        per_bucket = dict(query(url, "SELECT bucket, count(*) FROM shardq.tasks GROUP BY 1"))
        listed = sorted(per_bucket)[:3]
        proxy.withhold_reply(rb"AS listed\(bucket\)", times=1)
        tasks = client.claim_buckets("lost", listed, limit=100)
        assert len(proxy.withheld) == 1  # the fault happened
    [token] = {t.lease_token for t in tasks}
    assert sorted(t.bucket for t in tasks) == sorted(
        b for b in listed for _ in range(per_bucket[b]))
    locked = query(url, "SELECT lease_token, count(*) FROM shardq.tasks "
                        "WHERE status = 'locked' GROUP BY 1")
    assert locked == [(token, len(tasks))]  # nothing else taken, nothing taken twice
