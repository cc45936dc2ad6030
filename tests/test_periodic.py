"""Periodic schedules on a real database, time driven by a ManualClock (or the database's)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

import shardq
from shardq.loops import periodic
from shardq.loops.periodic import PeriodicLoop, Schedule
from shardq.maths.cadence import Cadence, Missed
from tests.helpers import one_line_error, shardq_cli

pytestmark = [pytest.mark.server, pytest.mark.behaviour]

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clean(client: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    """No schedules left from other tests (the client fixture empties the tasks)."""
    connect.execute("TRUNCATE shardq.periodic")


@pytest.fixture
def st(clean: None, clocked: Callable[..., shardq.Client]) -> shardq.Client:
    """A Client on the emptied database whose "now" is the test's ManualClock (T0)."""
    return clocked()


def every(name: str, seconds: float, *, queue: str = "ticks", missed: Missed = "once",
          **options: Any) -> Schedule:
    return Schedule(name, Cadence(every_s=seconds), queue, missed=missed, **options)


def cron(name: str, expression: str, *, tz: str = "UTC", missed: Missed = "once") -> Schedule:
    return Schedule(name, Cadence(expression, tz=tz), "ticks", missed=missed)


def loop(client: shardq.Client, *schedules: Schedule, queues: tuple[str, ...] = ("ticks",)
         ) -> PeriodicLoop:
    """What a starting worker does: register the app's schedules, then run the loop."""
    periodic.register(client.statements, schedules, queues)
    return PeriodicLoop(client.statements, schedules, queues, 1.0)


def slots(fired: list[periodic.Fired]) -> list[str]:
    return [f.slot.astimezone(UTC).strftime("%H:%M:%S") for f in fired]


def payloads(connect: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    rows = connect.execute("SELECT payload FROM shardq.tasks ORDER BY exec_time").fetchall()
    return [r[0] for r in rows]


def test_first_slot_after_registration_then_each_slot_once(
        st: shardq.Client, clock: shardq.ManualClock,
        connect: psycopg.Connection[Any]) -> None:
    ticker = loop(st, every("tick", 60, priority=5, max_attempts=3))
    assert ticker.run_once() == []  # registered at 12:00:00: the first slot is 12:01
    clock.advance(59)
    assert ticker.run_once() == []
    clock.advance(1)
    assert slots(ticker.run_once()) == ["12:01:00"]
    assert ticker.run_once() == []
    clock.advance(60)
    assert slots(ticker.run_once()) == ["12:02:00"]
    rows = connect.execute("SELECT queue, priority, max_attempts, payload FROM shardq.tasks "
                           "ORDER BY exec_time").fetchall()
    assert [r[:3] for r in rows] == [("ticks", 5, 3)] * 2
    first = rows[0][3]
    assert {k: first[k] for k in ("task", "args", "kwargs")} == {
        "task": "tick", "args": [], "kwargs": {}}
    assert datetime.fromisoformat(first["slot"]) == T0 + timedelta(minutes=1)


@pytest.mark.parametrize(("missed", "after_outage", "next_slots"), [
    ("once", ["13:00:00"], ["13:05:00"]),
    ("skip", [], ["13:05:00"]),
    ("all", [f"{12 + m // 60}:{m % 60:02}:00" for m in range(5, 61, 5)], ["13:05:00"]),
])
def test_missed_slots(st: shardq.Client, clock: shardq.ManualClock,
                      connect: psycopg.Connection[Any], missed: Missed,
                      after_outage: list[str], next_slots: list[str]) -> None:
    """No worker ran from 12:00 to 13:01:30: twelve slots of */5 passed."""
    ticker = loop(st, cron("five", "*/5 * * * *", missed=missed))
    clock.advance(3690)
    assert slots(ticker.run_once()) == after_outage
    assert ticker.run_once() == []
    clock.advance(3 * 60 + 40)  # 13:05:10: back on schedule
    assert slots(ticker.run_once()) == next_slots
    assert len(payloads(connect)) == len(after_outage) + len(next_slots)
    [info] = periodic.listing(st.statements)
    assert info.last_slot == T0 + timedelta(hours=1, minutes=5)
    assert info.next_slot == T0 + timedelta(hours=1, minutes=10)


def test_skip_runs_a_slot_seen_within_a_minute(st: shardq.Client,
                                               clock: shardq.ManualClock) -> None:
    ticker = loop(st, cron("five", "*/5 * * * *", missed="skip"))
    clock.advance(5 * 60 + 59)
    assert slots(ticker.run_once()) == ["12:05:00"]


def test_concurrent_loops_fire_each_slot_once(clean: None, dsn: str,
                                              clock: shardq.ManualClock,
                                              connect: psycopg.Connection[Any]) -> None:
    """Six loops in three processes' worth of clients race for every slot."""
    clients = [shardq.Client(dsn, clock=clock, pool_max_size=2) for _ in range(3)]
    try:
        loops = [loop(clients[i % 3], every("race", 10)) for i in range(6)]
        fired: list[periodic.Fired] = []
        lock = threading.Lock()
        barrier = threading.Barrier(len(loops))

        def run(ticker: PeriodicLoop) -> None:
            barrier.wait()
            got = ticker.run_once()
            with lock:
                fired.extend(got)

        for _ in range(15):
            clock.advance(10)
            threads = [threading.Thread(target=run, args=(t,)) for t in loops]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        for c in clients:
            c.close()
    counts = Counter(f.slot for f in fired)
    assert sorted(counts) == [T0 + timedelta(seconds=10 * k) for k in range(1, 16)]
    assert set(counts.values()) == {1}
    slots_enqueued = Counter(p["slot"] for p in payloads(connect))
    assert len(slots_enqueued) == 15
    assert set(slots_enqueued.values()) == {1}


def test_expression_change_takes_effect_from_the_next_slot(
        st: shardq.Client, clock: shardq.ManualClock) -> None:
    ticker = loop(st, cron("change", "*/5 * * * *", missed="all"))
    clock.advance(5 * 60)
    assert slots(ticker.run_once()) == ["12:05:00"]
    clock.advance(150)  # 12:07:30: a worker with new code starts
    loop(st, cron("change", "*/3 * * * *", missed="all"))
    clock.advance(180)  # 12:10:30
    # */3 had a slot at 12:06, before the change, which never fires; nor does 12:10 of */5.
    assert slots(ticker.run_once()) == ["12:09:00"]
    clock.advance(90)
    assert slots(ticker.run_once()) == ["12:12:00"]
    [info] = periodic.listing(st.statements)
    assert (info.expression, info.next_slot) == ("*/3 * * * *", T0 + timedelta(minutes=15))


def test_a_schedule_removed_from_the_code_stops_firing(
        st: shardq.Client, clock: shardq.ManualClock) -> None:
    old = loop(st, every("kept", 60), every("dropped", 60, missed="all"))
    clock.advance(60)
    assert sorted(f.name for f in old.run_once()) == ["dropped", "kept"]
    loop(st, every("kept", 60))  # a worker whose app no longer has "dropped" starts
    clock.advance(60)
    assert [f.name for f in old.run_once()] == ["kept"]  # old workers stop firing it too
    info = {i.name: i for i in periodic.listing(st.statements)}
    assert info["dropped"].removed_at == T0 + timedelta(minutes=1)
    assert info["dropped"].next_slot is None
    clock.advance(600)
    back = loop(st, every("kept", 60), every("dropped", 60, missed="all"))
    # Back in the code: on schedule from now on, nothing made up for the time it was gone.
    assert sorted(slots(back.run_once())) == ["12:12:00"]
    clock.advance(60)
    assert sorted(f.name for f in back.run_once()) == ["dropped", "kept"]


def test_schedules_on_other_queues_are_left_alone(
        st: shardq.Client, clock: shardq.ManualClock) -> None:
    other = loop(st, every("elsewhere", 60, queue="other"), queues=("other",))
    loop(st, every("here", 60))  # a worker of another app, consuming "ticks" only
    clock.advance(60)
    assert [f.name for f in other.run_once()] == ["elsewhere"]


@pytest.mark.parametrize(("start", "expected"), [
    # Spring forward (31 March 2030, 02:00 -> 03:00): 02:30 does not exist that day and
    # fires at 03:30 local (01:30 UTC); the next day it is 02:30 CEST (00:30 UTC).
    (datetime(2030, 3, 29, tzinfo=UTC), ["03-29 01:30", "03-30 01:30", "03-31 01:30",
                                         "04-01 00:30", "04-02 00:30"]),
    # Fall back (27 October 2030, 03:00 -> 02:00): 02:30 happens twice and fires at the
    # first (00:30 UTC, still CEST).
    (datetime(2030, 10, 25, tzinfo=UTC), ["10-25 00:30", "10-26 00:30", "10-27 00:30",
                                          "10-28 01:30", "10-29 01:30"]),
])
def test_daily_schedule_fires_once_a_day_across_dst(clean: None, dsn: str, start: datetime,
                                                    expected: list[str]) -> None:
    clock = shardq.ManualClock(start)
    with shardq.Client(dsn, clock=clock) as client:
        ticker = loop(client, cron("nightly", "30 2 * * *", tz="Europe/Berlin"))
        fired: list[periodic.Fired] = []
        for _ in range(5 * 24 * 4):  # five days in steps of 15 minutes
            clock.advance(900)
            fired += ticker.run_once()
    assert [f.slot.astimezone(UTC).strftime("%m-%d %H:%M") for f in fired] == expected
    assert {f.slot.astimezone(ZoneInfo("Europe/Berlin")).date()
            for f in fired} == {start.date() + timedelta(days=d) for d in range(5)}


def test_hourly_schedule_across_dst() -> None:
    hourly = Cadence("30 * * * *", tz="Europe/Berlin")
    spring, fall = datetime(2030, 3, 30, 23, tzinfo=UTC), datetime(2030, 10, 26, 22, tzinfo=UTC)
    walk = [spring]
    for _ in range(4):
        walk.append(hourly.after(walk[-1]))
    # 02:30 is 03:30: one slot, and every hour has one.
    assert [t.strftime("%H:%M") for t in walk[1:]] == ["23:30", "00:30", "01:30", "02:30"]
    walk = [fall]
    for _ in range(4):
        walk.append(hourly.after(walk[-1]))
    # The repeated 02:30 fires once, so that hour (01:00-02:00 UTC) has none.
    assert [t.strftime("%H:%M") for t in walk[1:]] == ["22:30", "23:30", "00:30", "02:30"]
    assert hourly.latest(datetime(2030, 10, 27, 1, 45, tzinfo=UTC)).strftime("%H:%M") == "00:30"


def test_interval_slots_are_aligned_to_the_epoch() -> None:
    two = Cadence(every_s=2)
    assert two.after(datetime(2030, 1, 1, 0, 0, 1, 500, tzinfo=UTC)) == datetime(
        2030, 1, 1, 0, 0, 2, tzinfo=UTC)
    assert two.after(datetime(2030, 1, 1, 0, 0, 2, tzinfo=UTC)) == datetime(
        2030, 1, 1, 0, 0, 4, tzinfo=UTC)
    assert two.latest(datetime(2030, 1, 1, 0, 0, 3, 999999, tzinfo=UTC)) == datetime(
        2030, 1, 1, 0, 0, 2, tzinfo=UTC)


def test_database_clock(clean: None, client: shardq.Client,
                        connect: psycopg.Connection[Any]) -> None:
    """With no clock of its own, "now" is the database's."""
    ticker = loop(client, every("db", 1))
    time.sleep(1.1)
    fired = ticker.run_once()  # one slot, or more if this process was held up
    row = connect.execute("SELECT now()").fetchone()
    assert row is not None
    assert fired
    # A clock of another kind (the host's in another zone, a test's) would be hours off.
    assert row[0] - timedelta(seconds=30) < fired[-1].slot <= row[0]


@pytest.mark.parametrize(("options", "message"), [
    ({"cron": "*/5 * * *  * * * *"}, "not a valid cron expression"),
    ({"cron": "61 * * * *"}, "not a valid cron expression"),
    ({"cron": "@sometimes"}, "not a valid cron expression"),
    ({"cron": 5}, "not a valid cron expression"),
    ({"cron": "0 0 31 2 *"}, "never fires: it matches no date"),
    ({"cron": "0 0 31 4,6,9,11 *"}, "never fires: it matches no date"),
    ({"cron": "* * * * * *"}, "has 6 fields, not 5 .* use every_s"),
    ({"cron": "* * * * * * *"}, "has 7 fields, not 5 .* use every_s"),
    ({"cron": "* * * * *", "tz": "Europe/Nowhere"}, "unknown time zone"),
    ({"every_s": float("nan")}, "every_s must be"),
    ({"every_s": float("inf")}, "every_s must be"),
    ({"every_s": 0}, "every_s must be"),
    ({"every_s": -5}, "every_s must be"),
    ({"every_s": True}, "every_s must be"),
    ({"every_s": 5, "tz": "Europe/Berlin"}, "tz applies to cron schedules only"),
    ({}, "either cron= or every_s="),
    ({"cron": "* * * * *", "every_s": 60}, "either cron= or every_s="),
    ({"every_s": 5, "missed": "sometimes"}, "missed must be one of"),
    ({"every_s": 5, "max_attempts": 0}, "max_attempts must be an integer in"),
    ({"every_s": 5, "priority": 1.5}, "priority must be an integer"),
    ({"every_s": 5, "queue": "a b"}, "invalid queue name"),
    ({"every_s": 5, "name": "a\x00b"}, "NUL"),
])
def test_bad_schedules_are_refused_at_registration(options: dict[str, Any],
                                                   message: str) -> None:
    app = shardq.App()
    with pytest.raises(shardq.ConfigError, match=message) as refused:
        app.periodic(**options)(lambda: None)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith("periodic schedule ")
    assert app.schedules == {}
    assert app.tasks == {}


def test_a_schedule_that_never_fires_is_refused_naming_it() -> None:
    app = shardq.App()
    with pytest.raises(shardq.ConfigError) as refused:
        @app.periodic(cron="0 0 31 2 *", name="leap")
        def never() -> None: ...
    assert str(refused.value) == "periodic schedule 'leap': cron '0 0 31 2 *' never fires: " \
                                 "it matches no date"
    assert app.schedules == {}


@pytest.mark.parametrize("written", ["0 0 31 2 *", "* * * * * *"])
def test_a_schedule_that_cannot_fire_leaves_the_others_firing(
        st: shardq.Client, clock: shardq.ManualClock,
        connect: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture,
        written: str) -> None:
    """A row another version of the app wrote with a cron expression this one refuses:
    it is logged once and listed with its error; the schedule beside it fires (`shardq
    periodic list` and `run` with such a row: test_cli_list_and_run)."""
    ticker = loop(st, every("tick", 1), cron("broken", "0 0 * * *"))
    connect.execute("UPDATE shardq.periodic SET cron = %s WHERE name = 'broken'", (written,))
    with caplog.at_level(logging.WARNING, logger="shardq"):
        for _ in range(3):
            clock.advance(1)
            assert [f.name for f in ticker.run_once()] == ["tick"]
    info = {i.name: i for i in periodic.listing(st.statements)}
    why = info["broken"].error
    assert str(why).startswith(f"cron {written!r} ")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", f"periodic schedule 'broken' cannot fire: {why}; the other schedules fire "
                  "as usual (`shardq periodic list` shows it)")]
    assert ticker.failing == {"broken": why}
    assert info["broken"].next_slot is None
    assert (info["tick"].error, info["tick"].next_slot) == (None, T0 + timedelta(seconds=4))

    loop(st, every("tick", 1), cron("broken", "0 0 * * *"))  # this version registers again
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="shardq"):
        clock.advance(1)
        ticker.run_once()
    assert [r.getMessage() for r in caplog.records] == [
        "periodic schedule 'broken' no longer fails"]
    assert ticker.failing == {}


def test_a_periodic_function_takes_no_arguments() -> None:
    app = shardq.App()

    def takes(n: int) -> None: ...

    with pytest.raises(shardq.ConfigError, match="takes no arguments"):
        app.periodic(every_s=5)(takes)  # type: ignore[arg-type]


def test_registration_makes_a_task_and_a_schedule() -> None:
    app = shardq.App()

    @app.periodic(cron="0 3 * * *", tz="Europe/Berlin", queue="nightly", priority=60,
                  max_attempts=2, lease_s=600, missed="all")
    def report() -> str:
        return "done"

    name = f"{__name__}.test_registration_makes_a_task_and_a_schedule.<locals>.report"
    assert report() == "done"
    assert report.name == name
    assert app.tasks[name].queue == "nightly"
    assert app.lease_s("nightly", 30) == 600
    assert app.schedules[name] == Schedule(name, Cadence("0 3 * * *", tz="Europe/Berlin"),
                                           "nightly", 60, 2, "all")


def test_cli_list_and_run(st: shardq.Client, clock: shardq.ManualClock, dsn: str,
                          connect: psycopg.Connection[Any]) -> None:
    ticker = loop(st, cron("nightly", "30 2 * * *", tz="Europe/Berlin"), every("tick", 30),
                  cron("broken", "0 0 * * *"))
    # As another version of the app could have written it: listed with its error, never
    # a traceback, and the other schedules listed and run as usual.
    connect.execute("UPDATE shardq.periodic SET cron = '0 0 31 2 *' WHERE name = 'broken'")
    clock.advance(30)
    ticker.run_once()
    listed = [json.loads(line) for line in
              shardq_cli("periodic", "list", "--dsn", dsn).stdout.splitlines()]
    assert listed == [
        {"name": "broken", "expression": "0 0 31 2 *", "tz": "UTC", "queue": "ticks",
         "missed": "once", "last_slot": None, "next_slot": None, "removed_at": None,
         "error": "cron '0 0 31 2 *' never fires: it matches no date"},
        {"name": "nightly", "expression": "30 2 * * *", "tz": "Europe/Berlin",
         "queue": "ticks", "missed": "once", "last_slot": None,
         "next_slot": "2030-01-02T01:30:00+00:00", "removed_at": None, "error": None},
        {"name": "tick", "expression": "every 30s", "tz": "UTC", "queue": "ticks",
         "missed": "once", "last_slot": "2030-01-01T12:00:30+00:00",
         "next_slot": "2030-01-01T12:01:00+00:00", "removed_at": None, "error": None},
    ]
    out = shardq_cli("periodic", "run", "nightly", "--dsn", dsn).stdout.strip()
    row = connect.execute("SELECT queue, payload FROM shardq.tasks WHERE id = %s",
                          (out,)).fetchone()
    assert row is not None
    assert row[0] == "ticks"
    assert row[1]["task"] == "nightly"
    # A run outside the schedule leaves the schedule as it was.
    assert periodic.listing(st.statements)[1].last_slot is None
    one_line_error(shardq_cli("periodic", "run", "nope", "--dsn", dsn, check=False),
                   "no periodic schedule named 'nope'")

