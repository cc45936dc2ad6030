"""A turnstile for an event loop: a burst of calls started at once is let in a few per
turn of the loop, so that their synchronous work never holds the loop for long.

An :class:`~shardq.AsyncClient` call validates its arguments and builds its statement
before its first ``await`` reaches the server: some tens of microseconds.  A thousand
calls started in one ``asyncio.gather`` would all do that in the same turn of the loop,
and every other coroutine on it (a web request, a heartbeat) would wait for the lot:
tens of milliseconds.  Behind the turnstile each call suspends once, and each turn lets
at most :data:`PER_TURN` of the waiting calls on, in the order they came.
"""

from __future__ import annotations

import asyncio
from collections import deque

PER_TURN = 16
"""Calls let on per turn of the loop.  At tens of microseconds of work each, a turn
stays near a millisecond; a lone call waits two turns (microseconds)."""


class Turnstile:
    """Lets waiting callers on at most ``per_turn`` per turn of the running event loop."""

    def __init__(self, per_turn: int = PER_TURN) -> None:
        if per_turn < 1:
            raise ValueError("per_turn must be at least 1")
        self.per_turn = per_turn
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._opening = False
        self._loop: asyncio.AbstractEventLoop | None = None

    async def enter(self) -> None:
        """Return once let on: never in the turn of the call, and after at most
        ``per_turn`` callers per turn that came before."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A loop that ended with callers waiting here (stopped and closed) never ran
            # the opening it had scheduled: its waiters are gone with it, and the new
            # loop's callers start afresh rather than wait behind them for ever.
            self._loop, self._waiting, self._opening = loop, deque(), False
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append(future)
        if not self._opening:
            self._opening = True
            loop.call_soon(self._open, loop)
        await future

    def _open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the next ``per_turn`` waiters on; they run in the next turn, and the
        turnstile opens again in that turn for the ones after them."""
        let_on = 0
        while self._waiting and let_on < self.per_turn:
            future = self._waiting.popleft()
            if not future.done():  # a caller cancelled while waiting takes no place
                future.set_result(None)
                let_on += 1
        if self._waiting:
            loop.call_soon(self._open, loop)
        else:
            self._opening = False
