"""A flow's tasks in the trace of the request that enqueued it (shardq.contrib.opentelemetry),
with the real SDK exporting spans in memory, a real database and a real worker whose
resolver releases the tasks that wait."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk.trace",
                    reason="OpenTelemetry is not installed: pip install -e '.[test,otel]'")

from opentelemetry.trace import SpanKind

import shardq
from shardq.contrib.opentelemetry import ShardqInstrumentor
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.helpers import query, wait_for
from tests.test_opentelemetry import Traced, ids_of, traceparent


@pytest.fixture
def traced() -> Iterator[Traced]:
    """shardq instrumented with a tracer provider whose spans are kept in memory."""
    traced = Traced()
    ShardqInstrumentor().instrument(tracer_provider=traced.provider)
    try:
        yield traced
    finally:
        ShardqInstrumentor().uninstrument()
        traced.provider.shutdown()


def test_a_flows_tasks_run_in_the_trace_that_enqueued_it(dsn: str, client: shardq.Client,
                                                         traced: Traced) -> None:
    app = shardq.App(dsn)

    @app.task(queue="traced-flow")
    def add(n: int, k: int) -> int:
        return n + k

    with traced.tracer.start_as_current_span("request") as request:
        handle = shardq.chain(add.s(1, 1), add.s(10),
                              shardq.group(add.s(100), add.s(1000))).enqueue()
    # One enqueue span for the whole flow, which it names; every task stores its context,
    # those that wait included.
    (send,) = traced.named("enqueue traced-flow")
    assert send.kind == SpanKind.PRODUCER
    assert send.parent is not None
    assert send.parent.span_id == ids_of(request)[1]
    assert send.attributes is not None
    assert send.attributes["messaging.shardq.flow.id"] == str(handle.id)
    assert send.attributes["messaging.batch.message_count"] == 4
    stored = dict(query(dsn, "SELECT id, trace_context FROM shardq.tasks "
                             "WHERE flow_id = %s", (handle.id,)))
    assert stored == {i: traceparent(send) for i in handle.ids}

    # The worker's resolver releases each task once the one before it succeeded: a
    # released task keeps the context, so its run is the enqueue span's child too.
    worker = Worker(app, ClientConfig(dsn=dsn), WorkerConfig(janitors=1, listen=False,
                                                             concurrency=2))
    worker.start()
    try:
        wait_for(lambda: client.result(handle.ids[3]).finished
                 and client.result(handle.ids[2]).finished, timeout=60, interval=0.05,
                 what="the flow's last tasks")
    finally:
        worker.stop(grace_s=10)
    assert [client.result(i).value for i in handle.ids] == [2, 12, 112, 1012]
    processed = {s.attributes["messaging.message.id"]: s
                 for s in traced.named("process traced-flow") if s.attributes}
    assert set(processed) == {str(i) for i in handle.ids}
    for span in processed.values():
        assert ids_of(span)[0] == ids_of(request)[0]  # the request's trace
        assert span.parent is not None
        assert span.parent.span_id == ids_of(send)[1]


def test_a_batchs_enqueue_span_names_its_flow(dsn: str, client: shardq.Client,
                                              traced: Traced) -> None:
    app = shardq.App(client=client)

    @app.task(queue="traced-batch")
    def member(n: int) -> None:
        pass

    @app.task(queue="traced-batch")
    def done(counts: dict[str, int]) -> None:
        pass

    ids = member.enqueue_many([(1,), (2,)], on_complete=done.s())
    (send,) = traced.named("enqueue traced-batch")
    assert send.attributes is not None
    assert send.attributes["messaging.shardq.flow.id"] == str(ids.flow_id)  # type: ignore[attr-defined]
    assert send.attributes["messaging.batch.message_count"] == 3
    # A plain enqueue names no flow.
    member.enqueue(3)
    plain = traced.named("enqueue traced-batch")[-1]
    assert plain.attributes is not None
    assert "messaging.shardq.flow.id" not in plain.attributes
