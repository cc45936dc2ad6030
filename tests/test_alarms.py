"""The worker's wake-up calls for the tasks it parked (shardq.worker.alarms), on a clock
the test moves."""

from __future__ import annotations

import pytest

from shardq.worker import alarms
from shardq.worker.alarms import Alarms


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_calls_are_made_when_due_soonest_first() -> None:
    clock, heard = Clock(), []
    calls = Alarms(lambda q, b: heard.append((q, b)), clock)
    calls.parked([("q", 1, 1005.0), ("q", 2, 1002.0), ("r", 3, None)])
    assert heard == [("r", 3)]  # due now: called at once
    assert calls.delay_after(0) == pytest.approx(2.0 + alarms.SLACK_S)
    clock.now = 1002.5
    assert calls.run_once() == 1
    assert heard[-1] == ("q", 2)
    clock.now = 1006.0
    assert calls.run_once() == 1
    assert heard[-1] == ("q", 1)
    assert len(calls) == 0
    assert calls.delay_after(0) == alarms.IDLE_S


def test_far_off_parks_and_a_flood_are_left_to_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    calls = Alarms(lambda q, b: None, clock)
    assert calls.add(clock.now + alarms.HORIZON_S + 1, "q", 0) is False
    monkeypatch.setattr(alarms, "MOST", 2)
    assert calls.add(clock.now + 1, "q", 0)
    assert calls.add(clock.now + 2, "q", 0)
    assert calls.add(clock.now + 3, "q", 0) is False
    assert len(calls) == 2
