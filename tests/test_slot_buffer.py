"""The prefetch buffer's waiting takers (slot threads): woken one after another for a
batch, each context taken once, and released at a close."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from uuid import uuid4

from shardq.core.task import Task
from shardq.handler import Context
from shardq.worker.buffer import Buffer
from tests.helpers import wait_for


def contexts(n: int) -> list[Context]:
    now = datetime.now(UTC)
    return [Context(Task(id=uuid4(), queue="q", bucket=0, exec_time=now, lease_token=uuid4(),
                         payload={}, attempts=1, max_attempts=3, priority=0, enqueued_at=now))
            for _ in range(n)]


class Takers:
    """``n`` threads taking from ``buffer`` until it closes; each holds what it took
    until ``release`` is set."""

    def __init__(self, buffer: Buffer, n: int) -> None:
        self.buffer = buffer
        self.taken: list[Context] = []
        self.release = threading.Event()
        self.release.set()
        self.threads = [threading.Thread(target=self._take, daemon=True) for _ in range(n)]
        for thread in self.threads:
            thread.start()

    def _take(self) -> None:
        while (context := self.buffer.get()) is not None:
            self.taken.append(context)
            self.release.wait()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(10)
        assert not any(thread.is_alive() for thread in self.threads)


def test_a_batch_put_while_takers_wait_is_taken_whole_once_each() -> None:
    buffer = Buffer()
    takers = Takers(buffer, 8)
    batches = [contexts(50) for _ in range(4)]
    for batch in batches:
        buffer.put_many(batch)
    wait_for(lambda: len(takers.taken) == 200, timeout=10, interval=0.01, what="all taken")
    assert sorted(map(id, takers.taken)) == sorted(id(c) for b in batches for c in b)
    buffer.close()
    takers.join()


def test_takers_held_by_long_runs_leave_the_rest_to_the_waiting_ones() -> None:
    # Every taker that woke passes the wake-up on: with all but one held in their runs,
    # the one still waiting takes what is left.
    buffer = Buffer()
    takers = Takers(buffer, 4)
    takers.release.clear()
    buffer.put_many(contexts(3))
    wait_for(lambda: len(takers.taken) == 3, timeout=10, interval=0.01, what="three held")
    buffer.put_many(contexts(1))
    wait_for(lambda: len(takers.taken) == 4, timeout=10, interval=0.01, what="the fourth")
    takers.release.set()
    buffer.close()
    takers.join()


def test_a_close_releases_the_waiting_takers_and_keeps_what_waits() -> None:
    buffer = Buffer()
    takers = Takers(buffer, 3)
    buffer.put_many(contexts(3))  # taken, then the takers wait on the empty buffer
    wait_for(lambda: len(takers.taken) == 3, timeout=10, interval=0.01, what="all taken")
    buffer.close()
    takers.join()
    left = contexts(2)
    buffer.put_many(left)
    assert buffer.get() is None
    assert buffer.take_all() == left


def test_a_put_while_a_taker_is_about_to_sleep_wakes_it() -> None:
    """A taker looks at the buffer under its lock and, finding it empty, counts itself
    as waiting and sleeps (:meth:`Buffer.get`).  Here the test is that taker, held at
    that point, while a put runs beside it: the put's wake-up must still reach it."""
    buffer = Buffer()
    with buffer._lock:  # noqa: SLF001  # a taker that found the buffer empty, under the lock
        assert buffer.empty()
        putter = threading.Thread(target=buffer.put_many, args=(contexts(1),))
        putter.start()
        wait_for(lambda: not buffer.empty())  # the put added its context, and now wakes
        buffer._waiting += 1  # noqa: SLF001  # the taker counts itself, then sleeps
        woken = buffer._ready.wait(timeout=10)  # noqa: SLF001
        buffer._waiting -= 1  # noqa: SLF001
    putter.join()
    assert woken
    assert buffer.pop() is not None
