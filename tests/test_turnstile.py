"""The event loop's turnstile: a burst of calls is let on a few per turn of the loop, in
order, and none in the turn it was made in (no database: the loop alone)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from shardq.core.turnstile import PER_TURN, Turnstile


class Turns:
    """Counts the turns of the running loop: a callback that schedules itself again."""

    def __init__(self) -> None:
        self.n = 0
        self.loop = asyncio.get_running_loop()
        self.handle = self.loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        self.handle = self.loop.call_soon(self._tick)

    def stop(self) -> None:
        self.handle.cancel()


def test_a_burst_is_let_on_a_few_per_turn_in_the_order_it_came() -> None:
    async def scenario() -> list[tuple[int, int]]:
        gate, turns = Turnstile(), Turns()
        entered: list[tuple[int, int]] = []  # (caller, turn)

        async def caller(i: int) -> None:
            await gate.enter()
            entered.append((i, turns.n))

        await asyncio.gather(*(caller(i) for i in range(10 * PER_TURN + 3)))
        turns.stop()
        return entered

    entered = asyncio.run(scenario())
    assert [i for i, _ in entered] == list(range(10 * PER_TURN + 3))
    per_turn = Counter(turn for _, turn in entered)
    assert max(per_turn.values()) == PER_TURN
    assert len(per_turn) == 11  # ten full turns and the rest: no turn left idle between


def test_a_lone_caller_waits_a_turn_and_no_more_than_two() -> None:
    async def scenario() -> tuple[int, int]:
        gate, turns = Turnstile(), Turns()
        await asyncio.sleep(0)
        before = turns.n
        await gate.enter()
        after = turns.n
        turns.stop()
        return before, after

    before, after = asyncio.run(scenario())
    assert 1 <= after - before <= 2


def test_a_caller_cancelled_while_waiting_takes_no_place() -> None:
    async def scenario(cancel: bool) -> dict[str, int]:
        gate, turns = Turnstile(per_turn=1), Turns()
        entered: dict[str, int] = {}  # caller: turns after the three came

        async def caller(name: str) -> None:
            await gate.enter()
            entered[name] = turns.n - came

        tasks = [asyncio.create_task(caller(name)) for name in "abc"]
        await asyncio.sleep(0)  # each now waits at the turnstile
        came = turns.n
        if cancel:
            tasks[0].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        turns.stop()
        return entered

    every = asyncio.run(scenario(cancel=False))
    assert every["b"] == every["a"] + 1  # one a turn
    assert every["c"] == every["b"] + 1
    cancelled = asyncio.run(scenario(cancel=True))
    assert "a" not in cancelled
    assert cancelled == {"b": every["a"], "c": every["b"]}  # b took a's turn


def test_a_new_loop_is_let_on_after_a_loop_closed_with_callers_waiting() -> None:
    gate = Turnstile()
    old = asyncio.new_event_loop()
    try:
        left = old.create_task(gate.enter())
        old.call_soon(old.stop)
        old.run_forever()  # one turn: it waits, and the opening is scheduled, not run
        assert not left.done()
    finally:
        old.close()  # closed before its opening ran

    async def enter_again() -> str:
        await asyncio.wait_for(gate.enter(), timeout=10)
        return "let on"

    assert asyncio.run(enter_again()) == "let on"


def test_a_turnstile_lets_at_least_one_on() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Turnstile(per_turn=0)
