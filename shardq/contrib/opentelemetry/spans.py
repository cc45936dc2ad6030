"""shardq's spans, after OpenTelemetry's semantic conventions for messaging.

One span per enqueue call (``send``, a producer span: one per batch), per worker claim
that took tasks (``receive``), per handler run (``process``) and per worker settle
statement (``settle``: the ack or nack of a batch of outcomes).  Each carries
``messaging.system`` ``shardq``, ``messaging.operation.name`` (enqueue, claim,
process, ack, nack) and ``messaging.operation.type``, and the queue as
``messaging.destination.name`` when the span concerns one queue; a span of one task
carries its id as ``messaging.message.id``, a span of several their count as
``messaging.batch.message_count``.  A handler's span adds the attempt
(``messaging.shardq.message.attempt``, from 1) and the task's key if it has one.  The
enqueue span of a flow (a canvas, or a batch with a completion callback) names it
(``messaging.shardq.flow.id``): every task of the flow stores that span's context, so
the handler spans of all of them, those its resolver released later included, are in
the trace of the request that enqueued the flow.

The W3C ``traceparent`` of the enqueue span is stored with the tasks.  The first
attempt's handler span is its child, so the trace of the request that enqueued a task
shows the task's run.  Later attempts (retries, and runs after a lost lease) start a
trace of their own with a link to the enqueue span: they come at the backoff's pace,
possibly hours after the request ended, and a request's trace that grows for hours
misleads (its duration, its critical path).  Tasks enqueued without a trace
(periodic slots, which the scheduler makes, or producers not traced) have handler
spans that start a trace.  Claim and settle spans, which concern batches, link to the
enqueue spans of their tasks (once each).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any
from uuid import UUID

from opentelemetry import context, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shardq.core import tracing
from shardq.core.task import Task

SYSTEM = "shardq"
SYSTEM_ATTR = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
MESSAGE_ID = "messaging.message.id"
BATCH_COUNT = "messaging.batch.message_count"
ATTEMPT = "messaging.shardq.message.attempt"
KEY = "messaging.shardq.message.key"
FLOW_ID = "messaging.shardq.flow.id"
TRACEPARENT = "traceparent"
PARSED_CONTEXTS = 4096  # trace contexts kept parsed (each a few hundred bytes)
REFRESH_S = 1.0  # how often a claim asks whether the global provider records, at most
_propagator = TraceContextTextMapPropagator()


def creation(task: Task) -> trace.SpanContext | None:
    """The context of the span that enqueued ``task``, if it was stored with it."""
    return None if task.trace_context is None else _parsed(task.trace_context)


@functools.lru_cache(maxsize=PARSED_CONTEXTS)
def _parsed(traceparent: str) -> trace.SpanContext | None:
    """A stored ``traceparent`` as a span context (None if it is not a valid one).  The
    tasks of a batch share theirs, and a worker reads each up to three times (claim,
    run, settle): parsing is a regular expression and a few objects, so it is cached."""
    found = trace.get_current_span(
        _propagator.extract({TRACEPARENT: traceparent})).get_span_context()
    return found if found.is_valid else None


def _attributes(operation: str, kind: str, queues: set[str] | str,
                tasks: Sequence[Task] | int) -> dict[str, Any]:
    """The conventions' attributes of a span about ``tasks`` (or a count of them)."""
    attributes: dict[str, Any] = {SYSTEM_ATTR: SYSTEM, OPERATION_NAME: operation,
                                  OPERATION_TYPE: kind}
    if isinstance(queues, str):
        attributes[DESTINATION] = queues
    elif len(queues) == 1:
        (attributes[DESTINATION],) = queues
    count = tasks if isinstance(tasks, int) else len(tasks)
    if count != 1:
        attributes[BATCH_COUNT] = count
    elif not isinstance(tasks, int):
        attributes[MESSAGE_ID] = str(tasks[0].id)
    return attributes


def _name(attributes: dict[str, Any]) -> str:
    """``{operation} {queue}``, or the operation alone for a span over several queues."""
    queue = attributes.get(DESTINATION)
    return f"{attributes[OPERATION_NAME]} {queue}" if queue else attributes[OPERATION_NAME]


def _links(tasks: Sequence[Task]) -> list[Link]:
    """Links to the enqueue spans of ``tasks`` (those enqueued under a trace), one per
    span: the tasks of a batch share theirs, and the SDK's links cost ~10 µs each."""
    texts = dict.fromkeys(t.trace_context for t in tasks if t.trace_context is not None)
    return [Link(c) for c in map(_parsed, texts) if c is not None]


def _fail(span: trace.Span, error: BaseException) -> None:
    """Record ``error`` on ``span``: an exception event, and the status ERROR."""
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class _Publishing(tracing.Publishing):
    """An enqueue's span and the ``traceparent`` stored with its tasks."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, trace.set_span_in_context(span))
        self.context = carrier.get(TRACEPARENT)

    def end(self, error: BaseException | None) -> None:
        """End the span, with ``error`` recorded if the call failed."""
        if error is not None:
            _fail(self.span, error)
        self.span.end()


class _Current:
    """A span made current for a block (a handler's run, a settle), ended after it, with
    an error raised in the block recorded on it."""

    __slots__ = ("span", "token")

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def __enter__(self) -> trace.Span:
        self.token = context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if error is not None:
            _fail(self.span, error)
        context.detach(self.token)
        self.span.end()


class OpenTelemetryTracer(tracing.Tracer):
    """Makes shardq's spans with an OpenTelemetry ``Tracer`` from ``provider`` (None: the
    global provider).

    With no tracer provider configured, OpenTelemetry's API makes spans that record
    nothing, yet each costs a few microseconds: a worker's claims ask whether the
    provider records (:meth:`refresh`), and while it does not, handler runs make no
    span (unless the task carries a trace context, which the run then carries on, for
    the handler's own calls) and settles none either.
    """

    def __init__(self, tracer: trace.Tracer, provider: trace.TracerProvider | None) -> None:
        self.tracer, self.provider = tracer, provider
        self.recording = False
        self._final = False  # whether `recording` can change no more
        self._next_s = 0.0
        self.refresh()

    def refresh(self) -> None:
        """Find out whether spans record.  The global provider is the API's stand-in until
        an SDK's provider is set, which can be done once only: after that (or with a
        provider of our own) the answer is final.  Until then, asking costs a look at the
        environment, done once a second at most."""
        if self._final or time.monotonic() < self._next_s:
            return
        self._next_s = time.monotonic() + REFRESH_S
        provider = self.provider or trace.get_tracer_provider()
        self._final = not isinstance(provider, trace.ProxyTracerProvider)
        self.recording = not isinstance(provider, trace.ProxyTracerProvider
                                        | trace.NoOpTracerProvider)

    def publish(self, queue: str, count: int, task_id: UUID | None, *,
                flow_id: UUID | None = None) -> tracing.Publishing:
        """Begin an enqueue span (a producer span in the current context)."""
        attributes = _attributes("enqueue", "send", queue, count)
        if task_id is not None:
            attributes[MESSAGE_ID] = str(task_id)
        if flow_id is not None:
            attributes[FLOW_ID] = str(flow_id)
        return _Publishing(self.tracer.start_span(_name(attributes), kind=SpanKind.PRODUCER,
                                                  attributes=attributes))

    def received(self, queue: str, tasks: Sequence[Task], began_ns: int) -> None:
        """Record a claim that took ``tasks``, from ``began_ns`` to now."""
        self.refresh()
        if not self.recording:
            return
        attributes = _attributes("claim", "receive", queue, tasks)
        self.tracer.start_span(_name(attributes), kind=SpanKind.CONSUMER, attributes=attributes,
                               links=_links(tasks), start_time=began_ns).end()

    def process(self, task: Task) -> _Current | None:
        """A handler run's span: the enqueue span's child on the first attempt, else a
        new trace's root linked to it (see the module's docstring)."""
        if not self.recording and task.trace_context is None:
            return None
        attributes = _attributes("process", "process", task.queue, [task])
        attributes[ATTEMPT] = task.attempts
        if task.key is not None:
            attributes[KEY] = task.key
        parent = creation(task)
        if parent is not None and task.attempts <= 1:
            within, links = trace.set_span_in_context(trace.NonRecordingSpan(parent)), None
        else:  # a fresh trace: not the slot thread's context, whatever it holds
            within, links = context.Context(), [Link(parent)] if parent is not None else None
        return _Current(self.tracer.start_span(_name(attributes), within, SpanKind.CONSUMER,
                                               attributes, links))

    def failed(self, error: BaseException) -> None:
        """Record a handler's failure on its span (the current one)."""
        _fail(trace.get_current_span(), error)

    def settle(self, operation: str, tasks: Sequence[Task]) -> _Current | None:
        """The span of an ack or nack statement of ``tasks``."""
        if not self.recording:
            return None
        attributes = _attributes(operation, "settle", {t.queue for t in tasks}, tasks)
        return _Current(self.tracer.start_span(_name(attributes), context.Context(),
                                               SpanKind.CLIENT, attributes, _links(tasks)))

    def trace_id(self) -> str | None:
        """The current span's trace id (32 hex digits), if it has a valid one."""
        found = trace.get_current_span().get_span_context()
        return trace.format_trace_id(found.trace_id) if found.is_valid else None

    def flush(self, timeout_s: float) -> None:
        """Flush the provider's span processors (the SDK's; the API's provider has none)."""
        provider = self.provider or trace.get_tracer_provider()
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            force_flush(int(timeout_s * 1000))
