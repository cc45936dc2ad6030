"""Durable tasks parked by a real worker, for the tests of what shows them: the record
(``get``), ``shardq task show``, the dashboard and the queue figures.

Each handler runs a step, then waits: for an event (after a short sleep, so that the
task parks twice and its second run is the task woken), for a long sleep, or for a
child enqueued on a queue no worker serves."""

from __future__ import annotations

from functools import partial
from typing import Any
from uuid import UUID

import shardq
from tests.flows_kit import running
from tests.helpers import wait_for

QUEUE = "durable-views"
IDLE = "durable-views-idle"  # no worker serves it: a child there never runs
app = shardq.App()


def price(order: str) -> dict[str, Any]:
    """A step's function: the order's price."""
    return {"order": order, "total": 42}


@app.task(queue=QUEUE, keep_result_s=600)
def approval(order: str, timeout_s: float | None = 3600) -> Any:
    """Prices the order, sleeps a moment, then waits for its approval."""
    ctx = shardq.current()
    ctx.step("price", price, order)
    ctx.sleep("cool-off", 0.2)
    return ctx.wait_event("approval", f"approved:{order}", timeout_s)


@app.task(queue=QUEUE)
def napper(order: str) -> None:
    """Prices the order, then sleeps an hour."""
    ctx = shardq.current()
    ctx.step("price", price, order)
    ctx.sleep("nap", 3600)


elsewhere = shardq.App()  # the tasks of an app no worker of these tests runs


@elsewhere.task(queue=IDLE)
def far() -> int:
    """A child no worker runs."""
    return 1


@app.task(queue=QUEUE)
def parent() -> Any:
    """Spawns a child and waits for it, an hour at most."""
    ctx = shardq.current()
    kid = ctx.spawn("kid", far.s())
    return ctx.wait("kids", [kid], timeout_s=3600)


def parked_on(client: Any, task_id: UUID, reason: str) -> bool:
    """Whether the task is parked, waiting for ``reason``."""
    info = client.get(task_id)
    return (info is not None and info.state == "parked"
            and info.waiting_for is not None and info.waiting_for.reason == reason)


def park(dsn: str, client: Any, waits: dict[UUID, str]) -> None:
    """Run a worker of ``app`` until each task of ``waits`` is parked on its reason."""
    with running(dsn, app):
        for task_id, reason in waits.items():
            wait_for(partial(parked_on, client, task_id, reason), timeout=60, interval=0.05,
                     what=f"task {task_id} to park on {reason}")
