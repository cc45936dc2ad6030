"""Flow control through the API: limits kept by the database at claim time, groups taking
turns, rates spread evenly, and capacity that comes back whatever ends a task."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Limits, Rate
from shardq.core import validate
from shardq.text import limits
from tests.clients import Blocking
from tests.helpers import wait_for_lock_wait

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

Q = "limited"


@pytest.fixture(autouse=True)
def no_limits(connect: psycopg.Connection[Any]) -> None:
    """Every test starts with no queue limits and no rate state."""
    connect.execute("DELETE FROM shardq.queues")
    connect.execute("DELETE FROM shardq.groups")


def running_slots(conn: psycopg.Connection[Any], queue: str = Q) -> list[int]:
    rows = conn.execute("SELECT slot FROM shardq.tasks WHERE queue = %s AND status = 'locked' "
                        "ORDER BY slot", (queue,)).fetchall()
    return [r[0] for r in rows]


def claim_until_empty(client: Blocking, limit: int = 10, **options: Any) -> list[shardq.Task]:
    """Claim until a claim takes nothing (each claim takes from one bucket or group)."""
    taken: list[shardq.Task] = []
    while batch := client.claim(Q, limit=limit, **options):
        taken += batch
    return taken


def test_limits_round_trip_and_clearing_removes_the_row(client: Blocking,
                                                        connect: psycopg.Connection[Any]) -> None:
    set_to = client.set_limits(Q, max_running=5, rate=Rate(100, 60), create=True)
    assert set_to == Limits(5, None, Rate(100, 60))
    control = client.limits(Q)
    assert control.limits == Limits(5, None, Rate(100, 60.0, 5))
    assert control.controlled
    assert not control.grouped
    client.set_limits(Q, create=True)
    assert not client.limits(Q).controlled
    assert connect.execute("SELECT count(*) FROM shardq.queues WHERE name = %s",
                           (Q,)).fetchone() == (0,)


def test_resume_keeps_the_limits(client: Blocking) -> None:
    client.set_limits(Q, max_running=2, create=True)
    client.pause(Q, create=True)
    assert client.resume(Q)
    assert client.limits(Q).limits.max_running == 2


@pytest.mark.parametrize("bad", [{"max_running": 0}, {"max_running": True},
                                 {"max_running_per_group": -1}])
def test_bad_limits_are_refused(client: Blocking, bad: dict[str, Any]) -> None:
    with pytest.raises(shardq.InvalidTask):
        client.set_limits(Q, **bad, create=True)


def test_an_unknown_queue_is_refused_unless_created(client: Blocking) -> None:
    typo = f"typo-{uuid.uuid4().hex[:8]}"
    with pytest.raises(shardq.UnknownQueue) as refused:
        client.set_limits(typo, max_running=2)
    [line] = str(refused.value).splitlines()
    assert line.endswith("to limit it before its first task, pass create=True")
    assert not client.limits(typo).limits.any
    assert client.set_limits(typo, max_running=2, create=True) == Limits(2)
    assert client.set_limits(typo, max_running=3) == Limits(3)  # known by its limits
    busy = f"busy-{uuid.uuid4().hex[:8]}"
    client.enqueue(busy, {})
    assert client.set_limits(busy, rate=Rate(5)) == Limits(rate=Rate(5))  # known by its task


def test_running_limits_have_one_bound_in_python_the_cli_and_the_dashboard(
        client: Blocking) -> None:
    top = validate.MAX_RUNNING
    assert client.set_limits(Q, max_running=top, max_running_per_group=top,
                             create=True) == Limits(top, top)
    assert limits.running(str(top)) == top  # the CLI's and the dashboard's parser
    for name in ("max_running", "max_running_per_group"):
        with pytest.raises(shardq.InvalidTask, match=f"between 1 and {top:,}"):
            client.set_limits(Q, **{name: top + 1}, create=True)
        with pytest.raises(shardq.InvalidTask, match=f"between 1 and {top:,}"):
            limits.running(str(top + 1), name)


def test_a_rate_may_be_given_as_its_text(client: Blocking) -> None:
    assert client.set_limits(Q, rate="100/60", rate_per_group="5/1/2",
                             create=True) == Limits(rate=Rate(100, 60.0),
                                                    rate_per_group=Rate(5, 1.0, 2))
    assert client.limits(Q).limits.rate == Rate(100, 60.0, 5)
    with pytest.raises(shardq.InvalidTask, match="rate must be COUNT/PERIOD_S"):
        client.set_limits(Q, rate="fast", create=True)
    with pytest.raises(shardq.InvalidTask, match=r"rate must be a shardq.Rate\(count"):
        client.set_limits(Q, rate=100, create=True)


def test_bad_rates_and_groups_are_refused() -> None:
    with pytest.raises(shardq.InvalidTask):
        Rate(0)
    with pytest.raises(shardq.InvalidTask):
        Rate(10, 0)
    with pytest.raises(shardq.InvalidTask):
        Rate(10, 1, burst=0)


def test_a_bad_group_is_refused(client: Blocking) -> None:
    for bad in ("", "x" * 257, 42, "nul\x00"):
        with pytest.raises(shardq.InvalidTask):
            client.enqueue(Q, {}, group=bad)


def test_max_running_holds_across_claims_and_frees_on_every_outcome(
        client: Blocking, connect: psycopg.Connection[Any]) -> None:
    client.set_limits(Q, max_running=3, create=True)
    client.enqueue_many(Q, [{"n": i} for i in range(10)])
    first = claim_until_empty(client)
    assert len(first) == 3
    assert running_slots(connect) == [1, 2, 3]
    assert client.claim(Q, limit=10) == []  # full
    client.ack(first[0])
    client.nack(first[1], "boom")
    client.release(first[2])
    again = claim_until_empty(client)
    assert len(again) == 3  # every way a task stops running gave its slot back
    assert sorted(running_slots(connect)) == [1, 2, 3]
    assert client.limits(Q).running == 3


def test_a_lowered_limit_binds_at_the_next_claim(client: Blocking) -> None:
    client.set_limits(Q, max_running=4, create=True)
    client.enqueue_many(Q, [{"n": i} for i in range(10)])
    held = claim_until_empty(client)
    assert len(held) == 4
    client.set_limits(Q, max_running=2, create=True)
    client.ack_many(held[:2])
    assert client.claim(Q, limit=10) == []  # still 2 running
    client.ack_many(held[2:])
    assert len(claim_until_empty(client)) == 2


def test_a_limit_above_1024_holds_by_its_slots_and_counts_after_a_lowering(
        client: Blocking, connect: psycopg.Connection[Any]) -> None:
    """Above 1024 the free slots are random numbers up to the limit (the running tasks
    are not read): the unique slots keep the limit; once it is lowered below running
    tasks' slots, claims count the running tasks until those end."""
    client.set_limits(Q, max_running=1100, create=True)
    client.enqueue_many(Q, [{"n": i} for i in range(1300)])
    held = claim_until_empty(client, 100)
    slots = running_slots(connect)
    assert 1000 < len(held) <= 1100  # the last few free numbers are seldom drawn
    assert len(set(slots)) == len(slots)
    assert min(slots) >= 1
    assert max(slots) <= 1100
    client.set_limits(Q, max_running=1050, create=True)
    slot_of = dict(connect.execute("SELECT id, slot FROM shardq.tasks WHERE queue = %s "
                                   "AND status = 'locked'", (Q,)).fetchall())
    above = [t for t in held if slot_of[t.id] > 1050]
    assert above  # some tasks run on slots above the lowered limit
    if len(held) >= 1050:
        assert client.claim(Q, limit=100) == []
    below = [t for t in held if slot_of[t.id] <= 1050]
    client.ack_many(below[:len(held) - 1040])  # 1040 left running, `above` among them
    more = claim_until_empty(client, 100)
    assert 0 < len(more) <= 10
    assert len(running_slots(connect)) <= 1050
    client.ack_many(above)  # no slot above the limit: uniqueness alone keeps it again
    claim_until_empty(client, 100)
    slots = running_slots(connect)
    assert len(slots) <= 1050
    assert max(slots) <= 1050


def test_plain_claims_take_nothing_from_a_limited_queue(client: Blocking) -> None:
    client.enqueue_many(Q, [{"n": i} for i in range(4)])
    client.set_limits(Q, max_running=1, create=True)
    assert all(client.claim_bucket(Q, b, limit=10) == [] for b in range(client.bucket_count))
    assert len(claim_until_empty(client)) == 1


def test_a_slot_taken_twice_is_refused_by_the_database(client: Blocking,
                                                        connect: psycopg.Connection[Any]) -> None:
    client.set_limits(Q, max_running=2, create=True)
    client.enqueue_many(Q, [{"n": i} for i in range(3)])
    (task,) = client.claim(Q, limit=1)
    other = connect.execute("SELECT id FROM shardq.tasks WHERE queue = %s AND status = "
                            "'available' LIMIT 1", (Q,)).fetchone()
    assert other is not None
    with pytest.raises(psycopg.errors.UniqueViolation):
        connect.execute("UPDATE shardq.tasks SET status = 'locked', slot = %s WHERE id = %s",
                        (running_slots(connect)[0], other[0]))
    client.ack(task)


def test_a_lease_that_expires_gives_its_slot_back(timed: Blocking,
                                                  clock: shardq.ManualClock) -> None:
    timed.set_limits(Q, max_running=1, create=True)
    timed.enqueue_many(Q, [{"n": 1}, {"n": 2}])
    assert len(claim_until_empty(timed, 5, lease_s=5)) == 1  # and its worker dies
    clock.advance(6)
    shardq.Janitor(timed).run_once()  # the task goes back in line
    assert len(claim_until_empty(timed, 5)) == 1


def test_groups_take_turns(client: Blocking) -> None:
    client.enqueue_many(Q, [{"g": "a", "n": i} for i in range(200)], group="a")
    client.enqueue_many(Q, [{"g": "b", "n": i} for i in range(5)], group="b")
    assert client.limits(Q).grouped
    order = []
    for _ in range(4):
        tasks = client.claim(Q, limit=5)
        order.append({t.payload["g"] for t in tasks})
        client.ack_many(tasks)
    assert {"b"} in order[:3]  # b waited for one turn of a at most, not for 200 tasks


def test_ungrouped_tasks_of_a_grouped_queue_get_their_turn(client: Blocking) -> None:
    client.enqueue_many(Q, [{"g": "a"} for _ in range(20)], group="a")
    client.enqueue_many(Q, [{"g": None} for _ in range(3)])
    seen: list[Any] = []
    for _ in range(30):
        tasks = client.claim(Q, limit=1)
        seen += [t.payload["g"] for t in tasks]
        client.ack_many(tasks)
        if None in seen:
            break
    assert None in seen


def test_max_running_per_group(client: Blocking) -> None:
    client.set_limits(Q, max_running_per_group=2, create=True)
    for g in "abc":
        client.enqueue_many(Q, [{"g": g} for _ in range(5)], group=g)
    held = claim_until_empty(client, 5)
    per_group = {g: sum(1 for t in held if t.payload["g"] == g) for g in "abc"}
    assert per_group == {"a": 2, "b": 2, "c": 2}
    assert client.limits(Q).running_most_group == 2
    assert client.get(held[0].id).group == held[0].payload["g"]


def test_a_rate_gives_its_burst_then_one_per_interval(timed: Blocking,
                                                      clock: shardq.ManualClock) -> None:
    timed.set_limits(Q, rate=Rate(10, 1.0, burst=3), create=True)
    timed.enqueue_many(Q, [{"n": i} for i in range(50)])
    assert len(claim_until_empty(timed)) == 3
    clock.advance(0.25)  # two intervals of 0.1 s
    assert len(claim_until_empty(timed)) == 2
    clock.advance(10)  # idle time does not pile up beyond the burst
    assert len(claim_until_empty(timed)) == 3


def test_tokens_a_claim_could_not_use_are_given_back(timed: Blocking,
                                                     clock: shardq.ManualClock) -> None:
    timed.set_limits(Q, rate=Rate(10, 1.0, burst=5), create=True)
    timed.enqueue_many(Q, [{"n": 1}, {"n": 2}])
    assert len(claim_until_empty(timed)) == 2
    timed.enqueue_many(Q, [{"n": i} for i in range(10)])
    assert len(claim_until_empty(timed)) == 3  # 2 of the burst of 5 were used, the rest given back


def test_a_rate_per_group(timed: Blocking, clock: shardq.ManualClock) -> None:
    timed.set_limits(Q, rate_per_group=Rate(1, 1.0, burst=1), create=True)
    for g in "ab":
        timed.enqueue_many(Q, [{"g": g} for _ in range(5)], group=g)
    got = [t.payload["g"] for t in claim_until_empty(timed, 5)]
    assert sorted(got) == ["a", "b"]
    clock.advance(1.0)
    got = [t.payload["g"] for t in claim_until_empty(timed, 5)]
    assert sorted(got) == ["a", "b"]


def test_a_keyed_task_put_back_keeps_its_group(client: Blocking) -> None:
    client.enqueue(Q, {"n": 1}, key="k", group="g")
    (task,) = claim_until_empty(client)
    client.nack(task, "again")
    info = client.get(task.id)
    assert info is not None
    assert (info.status, info.group) == ("available", "g")


def test_a_claim_that_lost_its_slot_to_a_concurrent_one_says_so(
        client: Blocking, dsn: str, connect: psycopg.Connection[Any]) -> None:
    client.set_limits(Q, max_running=1, create=True)
    first = client.enqueue(Q, {"n": 1})
    second = client.get(client.enqueue(Q, {"n": 2}))
    assert second is not None
    turns: list[Any] = []
    # Another claimer takes slot 1 for the first task and has not committed yet.
    with psycopg.connect(dsn) as rival:
        rival.execute("UPDATE shardq.tasks SET status = 'locked', slot = 1 WHERE id = %s",
                      (first,))
        claim = threading.Thread(target=lambda: turns.append(client.claim_turn(
            Q, second.bucket, after=None, control=client.limits(Q), limit=1)))
        claim.start()
        # The claim chose slot 1 too and waits on the unique index for the rival.
        wait_for_lock_wait(connect)
        rival.commit()
        claim.join()
    (turn,) = turns
    assert turn.tasks == []
    assert turn.raced


def test_a_fresh_rate_starts_with_its_full_burst(timed: Blocking,
                                                 clock: shardq.ManualClock) -> None:
    """One claim takes the whole burst, whichever buckets the tasks are in."""
    timed.enqueue_many(Q, [{"n": i} for i in range(20)])
    timed.set_limits(Q, rate=Rate(10, burst=3), create=True)
    assert len(timed.claim(Q, limit=10)) == 3
    assert timed.claim(Q, limit=10) == []
    clock.advance(0.1)
    assert len(timed.claim(Q, limit=10)) == 1
