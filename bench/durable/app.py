"""The app the durable tasks' benchmark (:mod:`bench.durable`) runs in its worker
processes: a module of its own, so that they import nothing of the harness.

Every task is on the suite's queue (``bench``).  A task that measures a wake-up returns
how late its handler resumed (the machine's clock), which its kept result holds.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import shardq

QUEUE = "bench"
KEEP_S = 86_400.0
STEPS = 10

app = shardq.App()


def nothing(i: int) -> int:
    """A step's function: the work is nothing."""
    return i


@app.task(queue=QUEUE)
def noop(n: int) -> None:
    """A plain task, or a chain's link: the work is nothing."""


@app.task(queue=QUEUE)
def parked(n: int, event: bool) -> None:
    """Parks for a day: on a sleep, or on an event nobody emits."""
    ctx = shardq.current()
    if event:
        ctx.wait_event("never", f"never-{n}", KEEP_S)
    else:
        ctx.sleep("long", KEEP_S)


@app.task(queue=QUEUE, keep_result_s=KEEP_S)
def sleeper(due_epoch: float) -> float:
    """Sleeps until ``due_epoch``; returns how late it resumed, in seconds."""
    shardq.current().sleep_until("nap", datetime.fromtimestamp(due_epoch, UTC))
    return time.time() - due_epoch


@app.task(queue=QUEUE, keep_result_s=KEEP_S)
def waiter(n: int) -> float:
    """Waits for event ``go-n``, whose payload is when it was emitted; returns how late
    it resumed, in seconds."""
    payload: Any = shardq.current().wait_event("go", f"go-{n}", KEEP_S)
    return time.time() - float(payload)


@app.task(queue=QUEUE)
def ten_steps(n: int) -> None:
    """A durable task of :data:`STEPS` steps that do nothing."""
    ctx = shardq.current()
    for i in range(STEPS):
        ctx.step(f"step-{i}", nothing, i)
