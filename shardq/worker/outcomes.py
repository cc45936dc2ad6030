"""What a handler's run came to: the outcome to write, and the failure line to log.

Shared by both kinds of handler slots (:mod:`shardq.worker.slots` and
:mod:`shardq.worker.coslots`): they differ in where handlers run, not in what a
return value or an exception means for the task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from shardq.app import App, Handler, NoHandler
from shardq.core import tracing
from shardq.core.lograte import RateLimit
from shardq.core.masking import Rule, masked_text
from shardq.core.task import Task
from shardq.core.validate import error_text, writable
from shardq.durable import Park
from shardq.handler import Fail, Retry
from shardq.ops.results import NOT_KEPT, Encoded, Kept, encode
from shardq.worker import isolation
from shardq.worker.completer import Outcome
from shardq.worker.frames import handler_traceback

log = logging.getLogger("shardq.worker")

FAILURE_LINES_PER_QUEUE = 20  # failure lines one queue logs every REPEAT_INTERVAL_S at most


FLOW_KEEP_S = float("inf")
"""How long a flow's task's result is kept: until its flow ends (the resolver then gives
it the flow's keep_result_s)."""


def _in_flow(task: Task) -> bool:
    """Whether ``task`` is a task of a flow, whose result the tasks after it take."""
    payload = task.payload
    return isinstance(payload, dict) and payload.get("flow_keep") is True


def describe(exc: BaseException, task: Task, rule: Rule | None) -> str:
    """The error text stored with a failed task: its traceback without shardq's own
    frames (:mod:`shardq.worker.frames`), with what ``rule`` masks in the task's payload
    masked, made storable by :func:`shardq.core.validate.error_text` (passwords masked,
    NULs removed, cut to size)."""
    if isinstance(exc, isolation.ChildFailed):  # the suspect's process told what happened
        return error_text(hidden(exc.text, task, rule))
    return error_text(hidden(handler_traceback(exc), task, rule))


def hidden(text: str, task: Task, rule: Rule | None) -> str:
    """``text`` with the values ``rule`` masks in the task's payload masked: before the
    text is cut to size, which could split a value and leave part of it unmatched."""
    return text if rule is None else masked_text(text, task.payload, rule)


def duration(seconds: float) -> str:
    """Seconds as a person reads them: ``0.2s``, ``1.5min``, ``2h``."""
    if seconds < 60:
        return f"{seconds:.3g}s"
    if seconds < 3600:
        return f"{seconds / 60:.3g}min"
    return f"{seconds / 3600:.3g}h"


class Outcomes:
    """Turns a run's handler, return value or exception into an :class:`Outcome`, and
    logs failures: one line per queue, error type and message every few seconds at
    most, and a few lines per queue whatever the messages."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._warnings = RateLimit()
        self._queue_lines = RateLimit(burst=FAILURE_LINES_PER_QUEUE)
        self._not_isolatable: set[Callable[..., Any]] = set()
        self._unkept: set[Callable[..., Any]] = set()  # handlers warned of a lost result

    def no_handler(self, task: Task, exc: NoHandler) -> Outcome:
        """The outcome of a task the app has no handler for: dead at once (another
        attempt would find none either, and a worker of another app is not meant to
        share this queue)."""
        tracing.failed(exc)
        self._warn(task, exc, dead=True)
        return Outcome(task, ok=False, error=error_text(str(exc)), dead=True)

    def isolatable(self, handler: Handler) -> isolation.Ref | None:
        """Where a child process finds ``handler``; None (warned once) when it cannot, and
        the suspect then runs in the worker like any task."""
        ref = isolation.ref_of(handler.fn, handler.raw)
        if ref is None and handler.fn not in self._not_isolatable:
            self._not_isolatable.add(handler.fn)
            log.warning("suspect tasks of %r run in the worker beside the others: a handler "
                        "defined inside a function cannot run in a process of its own "
                        "(define it at a module's top level)", handler.fn)
        return ref

    def returned(self, task: Task, handler: Handler, value: Any) -> Outcome:
        """The ack of a run that returned ``value``: see :meth:`succeeded`."""
        if handler.keep_result_s is None and not _in_flow(task):  # the usual case
            return Outcome(task, ok=True)
        return self.succeeded(task, handler, encode(value))

    def succeeded(self, task: Task, handler: Handler, encoded: Encoded | None) -> Outcome:
        """The ack of a run whose value was ``encoded`` (as a result keeps it), with the
        result to keep if its handler keeps results; a value that cannot be kept is
        warned of once per handler (its results say why)."""
        # A flow's task keeps its result until its flow ends, for the tasks that take it.
        keep_s = FLOW_KEEP_S if _in_flow(task) else handler.keep_result_s
        if keep_s is None or encoded is None:
            return Outcome(task, ok=True)
        kept = Kept.of(encoded, keep_s, self.app.client.config.max_payload_bytes)
        if kept.error is not None and handler.fn not in self._unkept:
            self._unkept.add(handler.fn)
            log.warning("%r returned a value its result cannot keep (%s): the tasks still "
                        "succeed, and their results hold this error instead of the value",
                        handler.fn, kept.error.removeprefix(NOT_KEPT))
        return Outcome(task, ok=True, kept=kept)

    def failed(self, task: Task, handler: Handler, exc: BaseException) -> Outcome:
        """The outcome of a run that raised: a park when a durable call waits (``Park``),
        a retry when asked (``Retry``), dead at once (``Fail``), else a failure that the
        backoff retries; its error, and the line logged, with what the handler's
        ``redact`` rule masks in the payload masked.  ``KeyboardInterrupt`` and
        ``SystemExit`` are not a handler's failure: they propagate."""
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise exc
        if isinstance(exc, Park):  # a durable call waits: not a failure
            return Outcome(task, ok=False, park=exc.parking)
        tracing.failed(exc)
        rule = handler.redact
        if isinstance(exc, Retry):
            return Outcome(task, ok=False, error=error_text(hidden(str(exc), task, rule)),
                           retry_in_s=exc.in_s)
        dead = isinstance(exc, Fail)
        self._warn(task, exc, dead=dead, rule=rule)
        return Outcome(task, ok=False, error=describe(exc, task, rule), dead=dead)

    def _warn(self, task: Task, exc: BaseException, *, dead: bool,
              rule: Rule | None = None) -> None:
        """Log a failure: what became of the task, and why (rate limited)."""
        kind, text = type(exc).__name__, str(exc).strip()
        repeats = self._warnings.allow((task.queue, kind, text.splitlines()[0] if text else ""))
        if repeats is None:
            return
        others = self._queue_lines.allow(task.queue)
        if others is None:  # distinct messages (ids in them, say) flooding in
            return
        left_out = [f"{repeats} more like it"] if repeats else []
        left_out += [f"{others} other failure line(s) of this queue"] if others else []
        more = (f" ({' and '.join(left_out)} not logged in the last "
                f"{self._warnings.interval_s:g}s)") if left_out else ""
        # The handler's span is current here: the line names its trace, if any.
        trace_id = tracing.trace_id()
        fields = {"task_id": task.id, "queue": task.queue, "attempt": task.attempts,
                  "error": kind}
        log.warning("%s%s%s", hidden(self._fate(task, exc, dead=dead), task, rule), more,
                    f" trace_id={trace_id}" if trace_id else "",
                    extra={**fields, "trace_id": trace_id} if trace_id else fields)

    def _fate(self, task: Task, exc: BaseException, *, dead: bool) -> str:
        """What became of a failed task, with the error: dead-lettered at once (no
        handler), dead (``Fail``, or its last attempt), or retried when."""
        if isinstance(exc, NoHandler):
            return f"task {task.id} dead-lettered: {exc}"
        run = f"task {task.id} (queue {task.queue}, attempt {task.attempts}/{task.max_attempts})"
        error = writable(f"{type(exc).__name__}: {exc}")  # a UTF-8 log takes it
        if dead:
            return f"{run} died: {error}"
        if task.is_last_attempt:
            return f"{run} died: {error} (its last attempt)"
        return f"{run} failed: {error}; retry in {self._retry_in(task)}"

    def _retry_in(self, task: Task) -> str:
        """When the task's next attempt comes, as ``sql/backoff.sql`` reckons it: the
        backoff for its attempts, cut by up to the jitter."""
        config = self.app.client.config
        full = min(config.backoff_cap_s, config.backoff_base_s * 2.0 ** min(task.attempts, 60))
        least = full * (1 - config.backoff_jitter)
        return duration(full) if least == full else f"{duration(least)} to {duration(full)}"
