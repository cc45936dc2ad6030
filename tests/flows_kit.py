"""What the tests of flows share: a worker run until a condition holds, tasks run by hand
(claimed, called and acked with their results kept as a worker keeps a flow's), a
flow's rows, and the open batches' pieces."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg

import shardq
from shardq.core.config import ClientConfig
from shardq.core.plan import Atomic, Plan, Steps
from shardq.core.statements import Statements
from shardq.core.task import TaskId
from shardq.loops.resolver import resolve
from shardq.ops import produce, settle
from shardq.ops.batches import OpenBatch
from shardq.ops.results import Kept, encode
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from shardq.worker.outcomes import FLOW_KEEP_S
from tests.helpers import claim_all, scalar, wait_for

FLOW_INTERVAL_S = 0.02
"""The resolver's pause in the workers these tests run: a released task is claimed soon."""


@contextmanager
def running(dsn: str, app: shardq.App, *, janitors: int = 1, count: int = 1,
            concurrency: int = 8) -> Iterator[None]:
    """``count`` workers of ``app`` running (each with a flows' resolver when ``janitors``)."""
    started: list[Worker] = []
    try:
        for _ in range(count):
            # No vacuum step: it needs a session of its own, which a transaction pooler
            # (CI runs these tests behind one) does not keep.
            started.append(Worker(
                app, ClientConfig(dsn=dsn, flow_interval_s=FLOW_INTERVAL_S, vacuum=False),
                WorkerConfig(janitors=janitors, listen=False, ack_flush_ms=5, poll_max_ms=20,
                             concurrency=concurrency)))
            started[-1].start()
        yield
    finally:
        for worker in started:
            worker.stop(grace_s=5)


def run_worker_until(dsn: str, app: shardq.App, done: Callable[[], bool], *,
                     janitors: int = 1, count: int = 1, what: str = "the flow to end",
                     timeout: float = 30) -> None:
    """Run workers of ``app`` (see :func:`running`) until ``done()``."""
    with running(dsn, app, janitors=janitors, count=count):
        wait_for(done, timeout=timeout, interval=0.02, what=what)


def ended(client: shardq.Client, flow_id: UUID) -> Callable[[], bool]:
    """A check: the flow ``flow_id`` has ended (no task of it is left)."""
    def check() -> bool:
        flow = client.flow(flow_id, limit=0)
        return flow is not None and flow.finished_at is not None
    return check


def in_state(client: shardq.Client, flow_id: UUID, state: str,
             **counts: int) -> Callable[[], bool]:
    """A check: the flow is in ``state`` with these ``counts``."""
    def check() -> bool:
        flow = client.flow(flow_id, limit=0)
        return (flow is not None and flow.state == state
                and all(flow.counts[k] == v for k, v in counts.items()))
    return check


def call(app: shardq.App, task: shardq.Task) -> Any:
    """What ``task``'s handler returns (it is called here, as a worker would)."""
    handler = app.resolve(task)
    if handler.raw:
        return handler.fn(task.payload)
    return handler.fn(*task.payload["args"], **task.payload["kwargs"])


def kept(value: Any) -> Kept:
    """``value`` as the result a worker keeps for a task of a flow."""
    return Kept(*encode(value), FLOW_KEEP_S)


def ack_run(client: shardq.Client, app: shardq.App, tasks: Sequence[shardq.Task]) -> list[Any]:
    """Run ``tasks``' handlers and ack them all in one statement, their results kept;
    returns the results."""
    values = [call(app, t) for t in tasks]
    client.perform(settle.ack(client.statements, tasks, [kept(v) for v in values]))
    return values


def run_by_hand(client: shardq.Client, app: shardq.App, queue: str, *,
                rounds: int = 20) -> int:
    """Claim, run and ack every task of ``queue`` and fold, until nothing is left to claim;
    returns how many tasks ran."""
    ran = 0
    for _ in range(rounds):
        tasks = claim_all(client, queue)
        if not tasks:
            return ran
        ack_run(client, app, tasks)
        ran += len(tasks)
        resolve(client.statements)
    raise AssertionError(f"{queue} still had tasks after {rounds} rounds")


def payload_of(conn: psycopg.Connection[Any], task_id: UUID) -> Any:
    """The payload of a task still in shardq.tasks (None once it is gone)."""
    row = conn.execute("SELECT payload FROM shardq.tasks WHERE id = %s", (task_id,)).fetchone()
    return None if row is None else row[0]


def status_of(conn: psycopg.Connection[Any], task_id: UUID) -> str | None:
    """The status of a task still in shardq.tasks (None once it is gone)."""
    row = conn.execute("SELECT status FROM shardq.tasks WHERE id = %s", (task_id,)).fetchone()
    return None if row is None else str(row[0])


def flow_rows(conn: psycopg.Connection[Any], flow_id: UUID) -> tuple[int, int, int]:
    """How many rows the flow has: its own (0 or 1), its tasks, its results."""
    return (scalar(conn, "SELECT count(*) FROM shardq.flows WHERE id = %s", (flow_id,)),
            scalar(conn, "SELECT count(*) FROM shardq.tasks WHERE flow_id = %s", (flow_id,)),
            scalar(conn, "SELECT count(*) FROM shardq.results WHERE flow_id = %s", (flow_id,)))


def written_rows(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """How many flows and tasks the database holds."""
    return (scalar(conn, "SELECT count(*) FROM shardq.flows"),
            scalar(conn, "SELECT count(*) FROM shardq.tasks"))


def add_to_batch(st: Statements, batch: OpenBatch, queue: str,
                 payloads: Sequence[Any]) -> Plan[list[TaskId]]:
    """The plan that writes tasks of an open batch (as a piece of a Spark job does): each
    names the batch's flow and its callback as the task that waits for it."""
    params = {**produce.placement(st, queue, None, None, 0, None), "trace_context": None}
    ids = produce.NewIds(st.dialect.new_id_values(len(payloads)))
    items = produce.Payloads.encoded([json.dumps(p) for p in payloads])
    link = produce.FlowLink(batch.flow_id, [batch.callback_id])

    def steps() -> Steps[list[TaskId]]:
        yield Atomic(lambda: produce.copy_tasks(st, params, ids, items, flow=link))
        return ids.objects()

    return Plan(steps)
