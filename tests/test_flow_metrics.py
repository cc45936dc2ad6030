"""A worker's Prometheus counters of flows: the events its resolver and janitor fold in, the
tasks they release and cancel, the flows that end.  On databases of their own, so that
every event folded is the test's."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

import shardq
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from shardq.worker.metrics import Metrics
from shardq.worker.observe import MeteredJanitor, MeteredResolver
from tests.helpers import claim_all, wait_for

pytestmark = pytest.mark.behaviour

COUNTERS = ("shardq_flow_events_folded_total", "shardq_flow_tasks_released_total",
            "shardq_flow_tasks_cancelled_total", "shardq_flows_finished_total")


def counted(metrics: Metrics) -> tuple[float | None, ...]:
    return tuple(metrics.registry.get_sample_value(name) for name in COUNTERS)


def state(client: shardq.Client, flow_id: UUID) -> str | None:
    found = client.flow(flow_id, limit=0)
    return None if found is None else found.state


def test_a_worker_counts_what_its_resolver_folds(databases: Any) -> None:
    dsn = databases.create()
    app = shardq.App(dsn)
    seen: list[int] = []

    @app.task(queue="counted")
    def add(n: int, k: int) -> int:
        seen.append(n)
        return n + k

    handle = shardq.chain(add.s(1, 1), add.s(10), add.s(100)).enqueue()
    # No vacuum step: it needs a session of its own, which a transaction pooler
    # (CI runs these tests behind one) does not keep.
    worker = Worker(app, ClientConfig(dsn=dsn, vacuum=False),
                    WorkerConfig(janitors=1, listen=False))
    assert [type(r) for r in worker.resolvers] == [MeteredResolver]
    worker.start()
    with shardq.Client(dsn) as client:  # the worker closes the app's client as it stops
        try:
            wait_for(lambda: state(client, handle.id) == "succeeded",
                     timeout=60, interval=0.05, what="the chain to succeed")
        finally:
            worker.stop(grace_s=10)
        assert client.result(handle.ids[2]).value == 112
    assert seen == [1, 2, 12]
    # Three acks folded in, two tasks released, one flow ended; whichever of the
    # resolver and the janitor folded each, the worker counted it once.
    assert counted(worker.metrics) == (3, 2, 0, 1)


def test_folds_count_cancelled_tasks_and_passes_count_theirs(databases: Any) -> None:
    dsn = databases.create()
    app = shardq.App(dsn)

    @app.task(queue="cancelled")
    def step() -> None:
        pass

    with shardq.Client(dsn) as client:
        metrics = Metrics()
        resolver = MeteredResolver(client, metrics)
        handle = client.enqueue_flow(shardq.chain(step.si(), step.si(), step.si()))
        [first] = claim_all(client, "cancelled")
        client.ack(first)
        assert resolver.run_once().released == 1
        assert counted(metrics) == (1, 1, 0, 0)
        client.cancel(handle.ids[1])
        # The cancel's event cancels the last step, whose own event ends the flow.
        while resolver.run_once().events:
            pass
        assert counted(metrics) == (3, 1, 1, 1)
        assert state(client, handle.id) == "failed"
        # A janitor's pass folds too, and counts what it folded in the same counters.
        other = client.enqueue_flow(shardq.chain(step.si(), step.si()))
        [head] = claim_all(client, "cancelled")
        assert head.id == other.ids[0]
        client.ack(head)
        report = MeteredJanitor(client, metrics).run_once()
        assert (report.flow_events, report.flow_released) == (1, 1)
        assert counted(metrics) == (4, 2, 1, 1)
