"""Where a tracer plugs into shardq; empty unless one is installed.

shardq imports nothing of OpenTelemetry.  :mod:`shardq.contrib.opentelemetry`'s
instrumentor installs a :class:`Tracer` here (:func:`install`), and the few places that
make a span (an enqueue, a worker's claim, a handler's run, a worker's settle) read
:data:`tracer` once and do nothing more when it is None: an untraced process pays one
global read per enqueue call, claim, handler run and settle statement.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from uuid import UUID

from shardq.core.task import Task


class Publishing(ABC):
    """The span of one enqueue call, begun when the call's plan is made and ended when the
    plan has run (the client runs the plan inside it, see :attr:`Plan.around`)."""

    context: str | None
    """The span's W3C ``traceparent``, stored with the tasks (None: nothing to store)."""

    @abstractmethod
    def end(self, error: BaseException | None) -> None:
        """End the span, recording ``error`` on it if the call failed."""

    def __enter__(self) -> Publishing:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.end(error)


class Tracer(ABC):
    """What shardq tells a tracer (the instrumentor's implementation makes the spans)."""

    @abstractmethod
    def publish(self, queue: str, count: int, task_id: UUID | None, *,
                flow_id: UUID | None = None) -> Publishing:
        """Begin the span of an enqueue of ``count`` tasks to ``queue`` (of ``task_id``,
        when the id is known beforehand; the tasks of flow ``flow_id``, when the enqueue
        writes a flow), in the caller's current context."""

    @abstractmethod
    def received(self, queue: str, tasks: Sequence[Task], began_ns: int) -> None:
        """A worker claimed ``tasks`` (at least one) of ``queue`` with a claim that began
        at ``began_ns`` (``time.time_ns()``) and ended now."""

    @abstractmethod
    def process(self, task: Task) -> AbstractContextManager[object] | None:
        """The span of one run of ``task``'s handler, current while the handler runs;
        None when there is none to make."""

    @abstractmethod
    def failed(self, error: BaseException) -> None:
        """The handler whose span is current failed with ``error``."""

    @abstractmethod
    def settle(self, operation: str,
               tasks: Sequence[Task]) -> AbstractContextManager[object] | None:
        """The span of a worker's settle statement (``operation``: ack or nack) of
        ``tasks``, an error raised in it recorded on it; None when there is none to make."""

    @abstractmethod
    def trace_id(self) -> str | None:
        """The current trace's id as 32 hex digits, or None outside a trace."""

    @abstractmethod
    def flush(self, timeout_s: float) -> None:
        """Export the spans still buffered, waiting up to ``timeout_s``."""


tracer: Tracer | None = None
"""The installed tracer; None (the default) turns every hook off."""


def install(new: Tracer | None) -> None:
    """Make ``new`` the tracer shardq reports to (None: trace nothing)."""
    global tracer
    tracer = new


def flush(timeout_s: float) -> None:
    """Have the installed tracer, if any, export what it still buffers (a worker ends its
    process without the interpreter's teardown, which would)."""
    current = tracer
    if current is not None:
        current.flush(timeout_s)


def trace_id() -> str | None:
    """The current trace's id when a tracer is installed and a trace is current."""
    current = tracer
    return None if current is None else current.trace_id()


_NO_SPAN = nullcontext()  # reusable: entering it does nothing


def process(task: Task) -> AbstractContextManager[object]:
    """The span of one run of ``task``'s handler (see :meth:`Tracer.process`), to hold
    current while it runs; a context that does nothing when no tracer makes one."""
    current = tracer
    span = None if current is None else current.process(task)
    return _NO_SPAN if span is None else span


def failed(error: BaseException) -> None:
    """Tell the installed tracer, if any, that the handler whose span is current failed."""
    current = tracer
    if current is not None:
        current.failed(error)
