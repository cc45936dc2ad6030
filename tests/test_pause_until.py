"""A pause that ends by itself (``pause(until=...)``): claims, the figures, the janitor, the CLI."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from tests.clients import open_client
from tests.conftest import Databases
from tests.helpers import claim_all, one_line_error, query, shardq_cli

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

# Far beyond the manual clocks of other tests on the shared database: their janitors
# must not end these pauses while they run.
LONG_S = 1000 * 86400.0


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def row(conn: psycopg.Connection[Any], queue: str) -> list[tuple[object, ...]]:
    return query(conn, "SELECT paused_at, paused_until FROM shardq.queues WHERE name = %s",
                 (queue,))


def test_claims_hand_out_the_tasks_once_the_pause_ends(timed: shardq.Client,
                                                       clock: shardq.ManualClock) -> None:
    queue = fresh("until")
    until = clock.now() + timedelta(seconds=LONG_S)
    since = timed.pause(queue, until=until, create=True)
    assert since == clock.now()
    timed.enqueue_many(queue, [{"n": n} for n in range(20)])
    assert claim_all(timed, queue) == []
    assert timed.paused()[queue] == since  # other tests may leave queues paused
    figures = timed.stats(queue)
    assert (figures["paused"], figures["paused_until"]) == (True, until.isoformat())
    clock.advance(LONG_S - 1)
    assert claim_all(timed, queue) == []
    clock.advance(1)  # the pause's end: no one resumes it
    assert len(claim_all(timed, queue)) == 20
    assert queue not in timed.paused()
    figures = timed.stats(queue)
    assert (figures["paused"], figures["paused_until"]) == (False, None)
    assert timed.resume(queue) is False  # the pause had ended


def test_pausing_again_keeps_its_start_and_sets_its_end(
        timed: shardq.Client, connect: psycopg.Connection[Any],
        clock: shardq.ManualClock) -> None:
    queue = fresh("again")
    first = timed.pause(queue, create=True)
    clock.advance(10)
    until = clock.now() + timedelta(seconds=LONG_S)
    assert timed.pause(queue, until=until) == first
    assert row(connect, queue) == [(first, until)]
    assert timed.pause(queue) == first  # no until: open-ended again
    assert row(connect, queue) == [(first, None)]
    assert timed.pause(queue, until=until) == first
    assert timed.resume(queue) is True
    assert row(connect, queue) == []  # resume clears both, and the row with no limits
    # A pause that ended counts as none: pausing again starts a new one.
    timed.pause(queue, until=clock.now() + timedelta(seconds=LONG_S), create=True)
    clock.advance(LONG_S + 5)
    assert timed.pause(queue, create=True) == clock.now()


def test_until_must_be_an_aware_time_to_come(timed: shardq.Client,
                                             clock: shardq.ManualClock) -> None:
    queue = fresh("bad-until")
    with pytest.raises(shardq.InvalidTask, match="timezone-aware"):
        timed.pause(queue, until=datetime(2031, 1, 1), create=True)
    with pytest.raises(shardq.InvalidTask, match="a time to come"):
        timed.pause(queue, until=clock.now(), create=True)
    with pytest.raises(shardq.InvalidTask, match="a time to come"):
        timed.pause(queue, until=clock.now() - timedelta(days=1), create=True)
    assert queue not in timed.paused()


def test_a_queue_whose_pause_ended_is_no_longer_known(timed: shardq.Client,
                                                      clock: shardq.ManualClock) -> None:
    queue = fresh("gone")
    timed.pause(queue, until=clock.now() + timedelta(seconds=LONG_S), create=True)
    assert queue in timed.queues()
    clock.advance(LONG_S)
    assert queue not in timed.queues()
    with pytest.raises(shardq.UnknownQueue):
        timed.pause(queue)


def test_the_janitor_clears_pauses_that_ended(databases: Databases, client_kind: str,
                                              clock: shardq.ManualClock) -> None:
    url = databases.create()  # a database of its own: its janitor ends every pause due
    with open_client(client_kind, url, clock=clock) as client:
        later = clock.now() + timedelta(hours=1)
        client.pause("bare", until=later, create=True)
        client.pause("limited", until=later, create=True)
        client.set_limits("limited", max_running=3)
        client.pause("open", create=True)
        client.pause("longer", until=later + timedelta(hours=1), create=True)
        assert client.run_janitor_once().pauses_ended == 0
        clock.advance(3600)
        assert client.run_janitor_once().pauses_ended == 2
        assert dict(query(url, "SELECT name, paused_at IS NULL AND paused_until IS NULL "
                               "FROM shardq.queues")) == {
            "limited": True, "open": False, "longer": False}  # "bare" needs no row
        assert client.limits("limited").limits.max_running == 3
        assert sorted(client.paused()) == ["longer", "open"]
        assert client.run_janitor_once().pauses_ended == 0


@pytest.mark.blocking_client
def test_cli_pause_until(db: str) -> None:
    until = (datetime.now().astimezone() + timedelta(days=1)).replace(microsecond=0)
    out = shardq_cli("queue", "pause", "work", "--create", "--until", until.isoformat(),
                     dsn=db).stdout
    assert out.startswith("queue work paused since ")
    assert out.strip().endswith(f" until {until.isoformat()}")
    assert query(db, "SELECT paused_until FROM shardq.queues") == [(until,)]
    stats = shardq_cli("stats", dsn=db).stdout
    assert "paused until " in stats
    out = shardq_cli("queue", "pause", "work", "--for-s", "7200", dsn=db).stdout
    assert " until " in out
    one_line_error(shardq_cli("queue", "pause", "work", "--until", "2020-01-01T00:00:00Z",
                              dsn=db, check=False), "a time to come")
    naive = shardq_cli("queue", "pause", "work", "--until", "2031-01-01T09:00:00", dsn=db,
                       check=False)
    assert naive.returncode == 2
    assert "names no time zone" in naive.stderr
