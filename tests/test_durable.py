"""Durable tasks on a worker: steps that run once, sleeps and waits that park the task
(holding no slot), events (emitted before, after, twice, never) and children awaited.

The handlers run in real workers on the shared database: each test counts what its
steps did in a table of its own (``runs``), written by the step functions."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import shardq
from tests.flows_kit import running
from tests.helpers import wait_for

pytestmark = [pytest.mark.behaviour]

QUEUE = "durable"
app = shardq.App()
_ran: Counter[str] = Counter()  # what step functions ran, by label (this process's workers)
_lock = threading.Lock()


def ran(label: str, value: Any = None) -> Any:
    """A step function: counts that it ran, returns ``value``."""
    with _lock:
        _ran[label] += 1
    return value


@pytest.fixture(autouse=True)
def fresh() -> None:
    _ran.clear()
    return


@app.task(queue=QUEUE, keep_result_s=600)
def three_steps(tag: str) -> list[Any]:
    ctx = shardq.current()
    a = ctx.step("one", ran, f"{tag}:1", 1)
    b = ctx.step("two", ran, f"{tag}:2", 2)
    if ctx.task.attempts == 1:
        raise RuntimeError("the first attempt fails after two steps")
    c = ctx.step("three", ran, f"{tag}:3", 3)
    return [a, b, c]


@app.task(queue=QUEUE, keep_result_s=600)
def sleeper(seconds: float) -> str:
    ctx = shardq.current()
    before = ctx.step("before", ran, "sleeper:before", "x")
    ctx.sleep("nap", seconds)
    after = ctx.step("after", ran, "sleeper:after", "y")
    return str(before) + str(after)


@app.task(queue=QUEUE, keep_result_s=600)
def quick(i: int) -> int:
    ran("quick")
    return i


@app.task(queue=QUEUE, keep_result_s=600)
def waiter(event: str, timeout_s: float | None = None) -> Any:
    ctx = shardq.current()
    ctx.step("first", ran, f"waiter:{event}")
    try:
        return {"got": ctx.wait_event("approval", event, timeout_s)}
    except shardq.EventTimeout:
        return {"timeout": True}


@app.task(queue=QUEUE, keep_result_s=600)
def child(i: int) -> int:
    ran(f"child:{i}")
    return i * i


@app.task(queue=QUEUE, keep_result_s=600)
def parent(n: int) -> int:
    ctx = shardq.current()
    ids = [ctx.spawn(f"child-{i}", child.s(i)) for i in range(n)]
    squares = ctx.wait("children", ids, timeout_s=120)
    return sum(squares)


@app.task(queue=QUEUE, keep_result_s=600)
async def async_durable(event: str) -> Any:
    ctx = shardq.current()

    async def twice(x: int) -> int:
        await asyncio.sleep(0)
        return int(ran("async:twice", 2 * x))

    a = await ctx.step("a", twice, 21)
    await ctx.sleep("nap", 0.2)
    payload = await ctx.wait_event("ev", event, 60)
    return [a, payload]


@app.task(queue=QUEUE, max_attempts=1)
def duplicate() -> None:
    ctx = shardq.current()
    ctx.step("same", ran, "dup")
    ctx.step("same", ran, "dup")


@pytest.fixture
def blocking(client: Any, dsn: str) -> Iterator[shardq.Client]:
    """A Client for the tests' enqueues and reads (after `client` emptied the tables)."""
    with shardq.Client(dsn) as c:
        app.use_client(c)
        yield c


def test_a_step_runs_once_across_a_retry(blocking: shardq.Client,
                                          dsn: str) -> None:
    task_id = three_steps.enqueue("r")
    with running(dsn, app):
        got = blocking.result(task_id, wait_s=60)
    assert got.value == [1, 2, 3]
    assert (_ran["r:1"], _ran["r:2"], _ran["r:3"]) == (1, 1, 1)


def test_a_sleep_holds_no_slot(dsn: str, blocking: shardq.Client) -> None:
    """With one handler slot, a task sleeping 3 s lets 50 others run, then finishes."""
    sleeping = sleeper.enqueue(3.0)
    with running(dsn, app, concurrency=1):
        wait_for(lambda: _ran["sleeper:before"] == 1, timeout=30, what="the sleeper to start")
        others = [quick.enqueue(i) for i in range(50)]
        wait_for(lambda: _ran["quick"] == 50, timeout=30, what="50 tasks beside the sleeper")
        assert blocking.result(sleeping).status != "succeeded"
        assert blocking.result(sleeping, wait_s=60).value == "xy"
    assert (_ran["sleeper:before"], _ran["sleeper:after"]) == (1, 1)
    assert len(others) == 50


def test_wait_event_emitted_after_before_twice_and_never(dsn: str,
                                                         blocking: shardq.Client) -> None:
    run = uuid.uuid4().hex
    early = f"early-{run}"
    assert blocking.emit_event(early, {"n": 1}) is True
    ids = {
        "after": waiter.enqueue(f"late-{run}"),
        "before": waiter.enqueue(early),
        "never": waiter.enqueue(f"none-{run}", 1.0),
    }
    with running(dsn, app):
        wait_for(lambda: _ran[f"waiter:late-{run}"] == 1, timeout=30, what="the wait to begin")
        time.sleep(0.3)
        assert blocking.emit_event(f"late-{run}", {"n": 2}) is True
        assert blocking.emit_event(f"late-{run}", {"n": 3}) is False  # the first emit wins
        got = {k: blocking.result(v, wait_s=60).value for k, v in ids.items()}
    assert got == {"after": {"got": {"n": 2}}, "before": {"got": {"n": 1}},
                   "never": {"timeout": True}}
    assert _ran[f"waiter:late-{run}"] == 1  # the step before the wait ran once


def test_a_parent_waits_for_its_children(dsn: str,
                                         blocking: shardq.Client) -> None:
    task_id = parent.enqueue(20)
    with running(dsn, app):
        assert blocking.result(task_id, wait_s=60).value == sum(i * i for i in range(20))
    assert all(_ran[f"child:{i}"] == 1 for i in range(20))


def test_a_coroutine_handler_awaits_its_durable_calls(dsn: str,
                                                      blocking: shardq.Client) -> None:
    event = f"async-{uuid.uuid4().hex}"
    task_id = async_durable.enqueue(event)
    with running(dsn, app):
        wait_for(lambda: _ran["async:twice"] == 1, timeout=30, what="the first step")
        blocking.emit_event(event, "go")
        assert blocking.result(task_id, wait_s=60).value == [42, "go"]
    assert _ran["async:twice"] == 1


def test_a_name_used_twice_fails_the_task(dsn: str,
                                          blocking: shardq.Client) -> None:
    task_id = duplicate.enqueue()
    with running(dsn, app):
        wait_for(lambda: blocking.get(task_id).status == "dead", timeout=30,  # type: ignore
                 what="the task to die")
    info = blocking.get(task_id)
    assert info is not None
    error = str(info.last_error)
    assert "DurableError" in error
    assert "'same' is used twice" in error


def test_steps_are_deleted_when_the_task_succeeds(dsn: str,
                                                  blocking: shardq.Client) -> None:
    task_id = three_steps.enqueue("d")
    with running(dsn, app):
        blocking.result(task_id, wait_s=60)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM shardq.steps WHERE task_id = %s",
                            (task_id,)).fetchone() == (0,)


@app.task(queue="durable-limited", keep_result_s=600)
def limited_parked(event: str) -> str:
    ctx = shardq.current()
    ctx.step("before", ran, "limited:before")
    return str(ctx.wait_event("go", event))


@app.task(queue="durable-limited", keep_result_s=600)
def limited_quick(i: int) -> int:
    ran("limited:quick")
    return i


def test_a_parked_task_holds_no_running_limit_slot(dsn: str, blocking: shardq.Client) -> None:
    """With max_running=1, the tasks behind a parked durable task run meanwhile."""
    blocking.set_limits("durable-limited", max_running=1, create=True)
    # Parked on an event the test emits once the others ran (a timed sleep could end
    # first on a loaded machine, and the test would prove nothing).
    event = f"limited-{uuid.uuid4()}"
    parked = limited_parked.enqueue(event)
    with running(dsn, app):
        wait_for(lambda: _ran["limited:before"] == 1, timeout=30, what="the task to park")
        for i in range(10):
            limited_quick.enqueue(i)
        wait_for(lambda: _ran["limited:quick"] == 10, timeout=30,
                 what="ten tasks past the parked task's slot")
        assert blocking.result(parked).status != "succeeded"
        blocking.emit_event(event, "woke")
        assert blocking.result(parked, wait_s=60).value == "woke"
    outcomes = [a.outcome for a in blocking.attempts(parked)]
    assert outcomes == ["parked", "acked"]  # the park is on record, and counts no attempt
    info = blocking.get(parked)
    assert info is None or info.attempts <= 1


_fail_once = {"dead-then-retried": True}


@app.task(queue=QUEUE, keep_result_s=600, max_attempts=1)
def dies_after_a_step() -> int:
    ctx = shardq.current()
    value = int(ctx.step("expensive", ran, "dies:expensive", 7))
    if _fail_once.pop("dead-then-retried", False):
        raise shardq.Fail("a dependency is down")
    return value + 1


def test_a_dead_durable_task_retried_from_the_dead_letters_resumes(
        dsn: str, blocking: shardq.Client) -> None:
    _fail_once["dead-then-retried"] = True
    task_id = dies_after_a_step.enqueue()
    with running(dsn, app):
        wait_for(lambda: getattr(blocking.get(task_id), "status", None) == "dead",
                 timeout=30, what="the task to die")
        assert blocking.retry_dead([task_id]) == [task_id]
        assert blocking.result(task_id, wait_s=60).value == 8
    assert _ran["dies:expensive"] == 1  # its checkpoint outlived its death


@app.task(queue=QUEUE, keep_result_s=600)
def suspect_journey(event: str) -> list[Any]:
    ctx = shardq.current()
    pid = ctx.step("where", os.getpid)
    payload = ctx.wait_event("go", event, 60)
    return [pid, payload]


def test_a_suspect_durable_task_runs_alone_with_its_durable_calls(
        dsn: str, blocking: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    """Its last lease expired without a result: it runs in a process of its own, whose
    durable calls checkpoint and park it as the worker's would."""
    event = f"suspect-{uuid.uuid4().hex}"
    task_id = suspect_journey.enqueue(event)
    connect.execute("UPDATE shardq.tasks SET last_error = 'lease expired: worker gone' "
                    "WHERE id = %s", (task_id,))
    with running(dsn, app):
        wait_for(lambda: connect.execute("SELECT parked FROM shardq.tasks WHERE id = %s",
                                         (task_id,)).fetchone() == ("event",),
                 timeout=60, what="the suspect to park on its event")
        blocking.emit_event(event, "go")
        pid, payload = blocking.result(task_id, wait_s=60).value
    assert payload == "go"
    assert pid != os.getpid()  # its step ran in the suspect's own process
