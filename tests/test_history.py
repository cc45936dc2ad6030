"""The hour's throughput: per-second counts folded into minutes, read back per minute."""

from __future__ import annotations

import uuid

import pytest

import shardq
from shardq.core.errors import InvalidTask
from shardq.ops import history
from tests.helpers import claim_all, query

pytestmark = [pytest.mark.server, pytest.mark.behaviour]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def counts(client: shardq.Client, queue: str, minutes: int) -> list[tuple[int, int]]:
    return [(m.enqueued, m.completed) for m in client.throughput(queue, minutes=minutes)]


def test_seconds_fold_into_minutes_without_counting_twice(timed: shardq.Client,
                                                          clock: shardq.ManualClock,
                                                          dsn: str) -> None:
    queue = fresh("hour")
    timed.enqueue_many(queue, [{"n": n} for n in range(30)])  # minute 0
    clock.advance(120)
    timed.enqueue_many(queue, [{"n": n} for n in range(10)])  # minute 2
    timed.ack_many(claim_all(timed, queue, most=5))
    clock.advance(400)  # minute 8: both minutes' seconds are past KEEP_S
    expected = [(30, 0), (0, 0), (10, 5)] + [(0, 0)] * 6
    assert counts(timed, queue, 9) == expected
    timed.perform(history.fold(timed.statements))
    slots = query(dsn, "SELECT DISTINCT slot FROM shardq.throughput WHERE queue = %s", (queue,))
    assert slots == [(-1,)]  # only minute rows are left
    assert counts(timed, queue, 9) == expected
    timed.perform(history.fold(timed.statements))  # a second fold (a retried one, say) adds nothing
    assert counts(timed, queue, 9) == expected
    assert timed.stats(queue)["enqueued_per_s"] == 0  # rates read the last minute only
    clock.advance(history.HISTORY_S)
    timed.perform(history.fold(timed.statements))
    assert query(dsn, "SELECT 1 FROM shardq.throughput WHERE queue = %s", (queue,)) == []


def test_recent_seconds_count_in_their_minute(timed: shardq.Client,
                                              clock: shardq.ManualClock) -> None:
    queue = fresh("recent")
    clock.advance(30)
    timed.enqueue_many(queue, [{"n": n} for n in range(4)])
    clock.advance(40)  # the next minute
    timed.ack_many(claim_all(timed, queue))
    assert counts(timed, queue, 3) == [(0, 0), (4, 0), (0, 4)]
    everything = timed.throughput(minutes=2)
    assert everything[0].enqueued >= 4  # every queue's together


@pytest.mark.parametrize("minutes", [0, 61, 1.5, True])
def test_bad_spans(client: shardq.Client, minutes: object) -> None:
    with pytest.raises(InvalidTask, match="minutes"):
        client.throughput(minutes=minutes)  # type: ignore[arg-type]
