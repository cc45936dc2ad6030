"""OpenTelemetry traces from enqueue to handler (shardq.contrib.opentelemetry), with the real
SDK exporting spans in memory, a real database and a real worker."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace",
                    reason="OpenTelemetry is not installed: pip install -e '.[test,otel]'")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import Span, SpanKind, StatusCode

import shardq
from shardq.contrib.opentelemetry import ShardqInstrumentor
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.apps import recorder
from tests.helpers import query, wait_for, worker_for

ROOT = Path(__file__).resolve().parent.parent


class Traced:
    """A tracer provider whose spans end up in ``exporter``; ``tracer`` is the app's."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("app")

    def named(self, name: str) -> list[ReadableSpan]:
        """The finished spans called ``name``, in the order they ended."""
        return [s for s in self.exporter.get_finished_spans() if s.name == name]


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


def traceparent(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def ids_of(span: ReadableSpan | Span) -> tuple[int, int]:
    """The trace id and span id of ``span``."""
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.trace_id, ctx.span_id


def attempt(span: ReadableSpan) -> int:
    """The attempt a handler's span ran."""
    assert span.attributes is not None
    return int(str(span.attributes["messaging.shardq.message.attempt"]))


def drain(dsn: str, app: shardq.App, client: shardq.Client, queue: str) -> None:
    worker = worker_for(dsn, app, concurrency=2, batch=10)
    worker.start()
    try:
        wait_for(lambda: client.stats(queue)["available"] + client.stats(queue)["locked"] == 0,
                 timeout=60, interval=0.05, what=f"{queue} to drain")
    finally:
        worker.stop(grace_s=10)


def test_handler_spans_join_the_producers_trace(dsn: str, client: shardq.Client,
                                               traced: Traced) -> None:
    app = shardq.App(dsn)
    ran: list[int] = []

    @app.task(queue="traced")
    def job(n: int) -> None:
        ran.append(n)

    with traced.tracer.start_as_current_span("request") as request:
        one = job.enqueue(1)
        batch = job.enqueue_many([(2,), (3,), (4,)])
    # The enqueue span's trace context is stored with the tasks.
    (single_send,) = [s for s in traced.named("enqueue traced")
                      if s.attributes and s.attributes.get("messaging.message.id") == str(one)]
    (batch_send,) = [s for s in traced.named("enqueue traced")
                     if s.attributes and s.attributes.get("messaging.batch.message_count") == 3]
    stored = dict(query(dsn, "SELECT id, trace_context FROM shardq.tasks"))
    assert stored[one] == traceparent(single_send)
    assert {stored[i] for i in batch} == {traceparent(batch_send)}
    request_ids = ids_of(request)
    for send in (single_send, batch_send):
        assert send.kind == SpanKind.PRODUCER
        assert send.parent is not None
        assert send.parent.span_id == request_ids[1]
        assert send.attributes is not None
        assert send.attributes["messaging.system"] == "shardq"
        assert send.attributes["messaging.operation.type"] == "send"
        assert send.attributes["messaging.operation.name"] == "enqueue"
        assert send.attributes["messaging.destination.name"] == "traced"

    drain(dsn, app, client, "traced")
    assert sorted(ran) == [1, 2, 3, 4]
    processed = traced.named("process traced")
    assert len(processed) == 4
    by_task = {s.attributes["messaging.message.id"]: s for s in processed if s.attributes}
    for task_id, send in [(one, single_send), *[(i, batch_send) for i in batch]]:
        span = by_task[str(task_id)]
        assert span.kind == SpanKind.CONSUMER
        assert ids_of(span)[0] == request_ids[0]  # the producer's trace
        assert span.parent is not None
        assert span.parent.span_id == ids_of(send)[1]
        assert span.status.status_code == StatusCode.UNSET
        assert span.attributes == {
            "messaging.system": "shardq", "messaging.operation.name": "process",
            "messaging.operation.type": "process", "messaging.destination.name": "traced",
            "messaging.message.id": str(task_id), "messaging.shardq.message.attempt": 1}
    # Claims and settles concern batches: they link to the enqueue spans of their tasks.
    claims = traced.named("claim traced")
    assert sum(s.attributes.get("messaging.batch.message_count", 1)  # type: ignore[misc]
               for s in claims if s.attributes) == 4
    assert all(s.kind == SpanKind.CONSUMER and s.attributes
               and s.attributes["messaging.operation.type"] == "receive" for s in claims)
    linked = {link.context.span_id for s in claims for link in s.links}
    assert linked == {ids_of(single_send)[1], ids_of(batch_send)[1]}
    acks = traced.named("ack traced")
    assert {link.context.span_id for s in acks for link in s.links} == {
        ids_of(single_send)[1], ids_of(batch_send)[1]}
    assert all(len({link.context.span_id for link in s.links}) == len(s.links)
               for s in acks)  # one link per enqueue span
    assert all(s.attributes and s.attributes["messaging.operation.type"] == "settle"
               for s in acks)


def test_failures_are_recorded_on_the_span_and_retries_are_linked(
        dsn: str, client: shardq.Client, traced: Traced,
        caplog: pytest.LogCaptureFixture) -> None:
    app = shardq.App(dsn)

    @app.task(queue="failing", max_attempts=2)
    def breaks(n: int) -> None:
        raise RuntimeError(f"broke {n} on attempt {shardq.current().task.attempts}")

    with traced.tracer.start_as_current_span("request") as request:
        task_id = breaks.enqueue(7)
    (send,) = traced.named("enqueue failing")
    with caplog.at_level(logging.WARNING, logger="shardq.worker"):
        worker = Worker(app, ClientConfig(dsn=dsn, backoff_base_s=0.05, backoff_jitter=0),
                        WorkerConfig(janitors=0, listen=False, concurrency=1, batch=1))
        worker.start()
        try:
            wait_for(lambda: query(dsn, "SELECT status FROM shardq.tasks") == [("dead",)],
                     timeout=60, interval=0.05, what="the task to die")
        finally:
            worker.stop(grace_s=10)
    first, second = sorted(traced.named("process failing"), key=attempt)
    for n, span in enumerate((first, second), 1):
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == f"RuntimeError: broke 7 on attempt {n}"
        (event,) = span.events
        assert event.name == "exception"
        assert event.attributes is not None
        assert event.attributes["exception.type"] == "RuntimeError"
        assert event.attributes["exception.message"] == f"broke 7 on attempt {n}"
    # The first attempt is the enqueue span's child, in the request's trace; the retry
    # starts a trace of its own, linked to the enqueue span.
    request_trace = ids_of(request)[0]
    assert ids_of(first)[0] == request_trace
    assert first.parent is not None
    assert first.parent.span_id == ids_of(send)[1]
    assert second.parent is None
    assert ids_of(second)[0] != request_trace
    assert [link.context.span_id for link in second.links] == [ids_of(send)[1]]
    nacks = traced.named("nack failing")
    assert len(nacks) == 2
    # Each failure's log line names the trace it ran in.
    lines = [r.getMessage() for r in caplog.records if str(task_id) in r.getMessage()]
    assert len(lines) == 2
    assert f"trace_id={request_trace:032x}" in lines[0]
    assert f"trace_id={ids_of(second)[0]:032x}" in lines[1]
    assert [getattr(r, "trace_id", None) for r in caplog.records
            if str(task_id) in r.getMessage()] == [f"{request_trace:032x}",
                                                    f"{ids_of(second)[0]:032x}"]


def test_uninstrument_stops_the_spans(dsn: str, client: shardq.Client,
                                      traced: Traced,
                                      caplog: pytest.LogCaptureFixture) -> None:
    app = shardq.App(dsn)

    @app.task(queue="untraced")
    def fails() -> None:
        raise RuntimeError("no trace")

    ShardqInstrumentor().uninstrument()
    with traced.tracer.start_as_current_span("request"):
        fails.enqueue()
        fails.enqueue_many([(), ()])
    assert query(dsn, "SELECT count(*), count(trace_context) FROM shardq.tasks "
                      "WHERE queue = 'untraced'") == [(3, 0)]
    with caplog.at_level(logging.WARNING, logger="shardq.worker"):
        drain(dsn, app, client, "untraced")
    assert [s.name for s in traced.exporter.get_finished_spans()] == ["request"]
    failures = [r for r in caplog.records if "no trace" in r.getMessage()]
    assert failures
    assert all("trace_id" not in r.getMessage() and not hasattr(r, "trace_id")
               for r in failures)


def test_with_no_tracer_provider_nothing_is_traced_or_stored(
        dsn: str, client: shardq.Client, caplog: pytest.LogCaptureFixture) -> None:
    """Instrumented with OpenTelemetry's API alone (no SDK provider is ever set in the
    test process), tasks run as usual: no trace context is stored, no log line names a
    trace."""
    app = shardq.App(dsn)
    ran: list[int] = []

    @app.task(queue="api-only")
    def job(n: int) -> None:
        ran.append(n)
        if n == 2:
            raise shardq.Fail("no provider")  # dead at once: it runs once

    ShardqInstrumentor().instrument()
    try:
        job.enqueue(1)
        job.enqueue_many([(2,), (3,)])
        assert query(dsn, "SELECT count(*), count(trace_context) FROM shardq.tasks") == [(3, 0)]
        with caplog.at_level(logging.WARNING, logger="shardq.worker"):
            drain(dsn, app, client, "api-only")
    finally:
        ShardqInstrumentor().uninstrument()
    assert sorted(ran) == [1, 2, 3]
    (line,) = [r.getMessage() for r in caplog.records if "no provider" in r.getMessage()]
    assert "trace_id" not in line


def test_the_async_client_and_keyed_enqueues_store_the_trace_context(
        dsn: str, traced: Traced) -> None:
    async def produce() -> list[Any]:
        async with shardq.AsyncClient(dsn) as aclient:
            with traced.tracer.start_as_current_span("request"):
                first = await aclient.enqueue("async-traced", {"n": 1})
                keyed = await aclient.enqueue("async-traced", {"n": 2}, key="k")
                many = await aclient.enqueue_many("async-traced", [{}, {}], keys=["a", None])
        return [first, keyed, *many]

    ids = asyncio.run(produce())
    sends = traced.named("enqueue async-traced")
    assert len(sends) == 3
    stored = dict(query(dsn, "SELECT id, trace_context FROM shardq.tasks"))
    assert [stored[i] for i in ids] == [traceparent(sends[0]), traceparent(sends[1]),
                                        traceparent(sends[2]), traceparent(sends[2])]
    # A re-enqueue of a waiting key carries the latest enqueue's trace, with its payload.
    with shardq.Client(dsn) as client, traced.tracer.start_as_current_span("again"):
        assert client.enqueue("async-traced", {"n": 3}, key="k") == ids[1]
    latest = traced.named("enqueue async-traced")[-1]
    assert dict(query(dsn, "SELECT id, trace_context FROM shardq.tasks"))[ids[1]] == \
        traceparent(latest)


def test_opentelemetry_instrument_traces_a_worker_with_no_code_change(
        app_env: dict[str, str], db: str, traced: Traced) -> None:
    """The worker runs under ``opentelemetry-instrument`` (the entry point finds the
    instrumentor) and prints its spans with the console exporter; the producer runs
    here, instrumented in-process."""
    command = Path(sys.executable).parent / "opentelemetry-instrument"
    if not command.exists():
        pytest.skip("opentelemetry-instrument is not installed (opentelemetry-instrumentation)")
    with traced.tracer.start_as_current_span("request") as request:
        task_id = recorder.record.enqueue(5)
    env = {**app_env, "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "worker"}
    proc = subprocess.Popen([str(command), sys.executable, "-m", "shardq", "consume",
                             "tests.apps.recorder:app", "--queue", "work"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: query(db, "SELECT count(*) FROM runs") == [(1,)], timeout=60,
                 what="the worker to run the task")
        wait_for(lambda: query(db, "SELECT count(*) FROM shardq.tasks") == [(0,)], timeout=30,
                 what="the ack")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    printed = console_spans(out)
    (process,) = [s for s in printed if s["name"] == "process work"]
    request_trace = ids_of(request)[0]
    assert process["context"]["trace_id"] == f"0x{request_trace:032x}"
    (send,) = traced.named("enqueue work")
    assert process["parent_id"] == f"0x{ids_of(send)[1]:016x}"
    assert process["kind"] == "SpanKind.CONSUMER"
    assert process["attributes"] == {
        "messaging.system": "shardq", "messaging.operation.name": "process",
        "messaging.operation.type": "process", "messaging.destination.name": "work",
        "messaging.message.id": str(task_id), "messaging.shardq.message.attempt": 1}
    assert process["resource"]["attributes"]["service.name"] == "worker"
    assert {s["name"] for s in printed} >= {"claim work", "process work", "ack work"}


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed, one after another."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) >= 0:
        value, at = decoder.raw_decode(text, at)
        found.append(value)
    return found
