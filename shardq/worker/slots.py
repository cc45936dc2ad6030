"""Handler slots: threads that take claimed tasks from the buffer and run their handlers.

Sync handlers run in the slot's thread; async handlers run on one shared event
loop while the slot waits for them, so ``concurrency`` bounds both kinds.  A suspect
task runs alone in a process of its own while its slot waits for it
(:mod:`shardq.worker.isolation`).
"""

from __future__ import annotations

import asyncio
import logging
import queue as queue_module
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from shardq.app import App, Handler, NoHandler
from shardq.core import tracing
from shardq.core.task import Task
from shardq.core.validate import error_text
from shardq.handler import Context, Fail, Retry, bind, unbind
from shardq.ops.results import NOT_KEPT, Encoded, Kept, encode
from shardq.worker import isolation
from shardq.worker.buffer import Buffer
from shardq.worker.completer import Outcome
from shardq.worker.logs import RateLimit
from shardq.worker.metrics import Metrics

log = logging.getLogger("shardq.worker")

TAKE_TIMEOUT_S = 0.1
# Weight of the newest handler duration in the moving average (about the last 20 runs).
DURATION_WEIGHT = 0.05
MIN_DURATION_S = 1e-6
FAILURE_LINES_PER_QUEUE = 20  # failure lines one queue logs every REPEAT_INTERVAL_S at most


def describe(exc: BaseException) -> str:
    """The error text stored with a failed task: its traceback, made storable by
    :func:`shardq.core.validate.error_text` (passwords masked, NULs removed, cut to size)."""
    if isinstance(exc, isolation.ChildFailed):  # the suspect's process told what happened
        return error_text(exc.text)
    return error_text("".join(traceback.format_exception(exc)))


class EventLoopThread:
    """One asyncio event loop in a daemon thread, for async handlers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="shardq-asyncio",
                                       daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the loop (coroutines still running are abandoned with the process)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


class Slots:
    """``concurrency`` threads running handlers; outcomes go to ``report``."""

    def __init__(self, app: App, buffer: Buffer, *, concurrency: int,
                 report: Callable[[Context, Outcome], None], taken: Callable[[], None],
                 metrics: Metrics) -> None:
        self.app, self.buffer, self.report, self.taken = app, buffer, report, taken
        self.concurrency = concurrency
        self._mean_s: float | None = None  # handler durations, a moving average
        self._stop = threading.Event()
        # What each slot runs now, and since when (None: idle).  Each slot writes only
        # its own entry, with one assignment, and readers copy the list: no lock on
        # the path every task takes.
        self._now: list[tuple[Context, float] | None] = [None] * concurrency
        self._recorders = [metrics.durations.recorder() for _ in range(concurrency)]
        # Failure lines: one per queue, error type and message every few seconds, and
        # a few per queue whatever the messages.
        self._warnings = RateLimit()
        self._queue_lines = RateLimit(burst=FAILURE_LINES_PER_QUEUE)
        self._not_isolatable: set[Callable[..., Any]] = set()
        self._unkept: set[Callable[..., Any]] = set()  # handlers warned of a lost result
        self._events = EventLoopThread()
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"shardq-slot-{i}",
                                          daemon=True) for i in range(concurrency)]

    def start(self) -> None:
        """Start the slot threads."""
        for thread in self._threads:
            thread.start()

    def running(self) -> list[Context]:
        """Contexts of the tasks whose handlers are running now."""
        return [entry[0] for entry in list(self._now) if entry is not None]

    @property
    def free(self) -> int:
        """How many slots run no handler now."""
        return list(self._now).count(None)

    def rate(self) -> float | None:
        """Tasks per second the slots get through at the recent handler durations, or at
        the age of the oldest running handler when that is longer (handlers that became
        slow, or hang); None before a handler finished."""
        mean = self._mean_s
        if mean is None:
            return None
        oldest = min((entry[1] for entry in list(self._now) if entry is not None), default=None)
        if oldest is not None:
            mean = max(mean, time.perf_counter() - oldest)
        return self.concurrency / max(mean, MIN_DURATION_S)

    def close(self) -> None:
        """Take no new tasks from the buffer."""
        self._stop.set()

    def join(self, grace_s: float) -> list[Context]:
        """Wait up to ``grace_s`` for running handlers; return the contexts still running."""
        self._stop.set()
        deadline = time.monotonic() + grace_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._events.stop()
        return self.running()

    def _serve(self, me: int) -> None:
        while not self._stop.is_set():
            # One task at a time: a task a slot took waits for nothing but its handler,
            # so a slow handler never holds tasks back from idle slots elsewhere.
            try:
                context = self.buffer.get(TAKE_TIMEOUT_S)
            except queue_module.Empty:
                continue
            self.taken()
            outcome = self._one(me, context)
            if outcome is not None:
                self.report(context, outcome)

    def _one(self, me: int, context: Context) -> Outcome | None:
        """Run one task's handler in this slot; None if it was given back meanwhile."""
        self._now[me] = (context, time.perf_counter())
        try:
            tracer = tracing.tracer
            span = None if tracer is None else tracer.process(context.task)
            if span is None:
                return self._run(me, context)
            with span:  # current while the handler runs
                return self._run(me, context)
        finally:
            self._now[me] = None

    def _run(self, me: int, context: Context) -> Outcome:
        task = context.task
        start = time.perf_counter()
        try:
            handler = self.app.resolve(task)
        except NoHandler as exc:
            # Dead at once: another attempt would find no handler either, and a worker
            # of another app is not meant to share this queue.
            _traced_failure(exc)
            self._warn(task, exc, dead=True)
            return Outcome(task, ok=False, error=error_text(str(exc)), dead=True)
        token = bind(context)
        try:
            ref = self._isolatable(handler) if task.suspect else None
            if ref is not None:
                encoded = isolation.run_alone(ref, context)
            elif handler.is_async:
                result: Any = handler.call(task.payload)
                context.future = asyncio.run_coroutine_threadsafe(
                    _with_context(context, result), self._events.loop)
                encoded = self._encoded(handler, context.future.result())
            else:
                encoded = self._encoded(handler, handler.call(task.payload))
            return Outcome(task, ok=True, kept=self._kept(handler, encoded))
        except Retry as exc:
            _traced_failure(exc)
            return Outcome(task, ok=False, error=error_text(str(exc)), retry_in_s=exc.in_s)
        except Fail as exc:
            return self._failed(task, exc, dead=True)
        except BaseException as exc:  # a handler's failure is the task's
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return self._failed(task, exc, dead=False)
        finally:
            unbind(token)
            took = time.perf_counter() - start
            self._recorders[me].observe(task.queue, took)
            # A race between slots loses one sample at worst: no lock on the hot path.
            mean = self._mean_s
            self._mean_s = took if mean is None else mean + DURATION_WEIGHT * (took - mean)

    @staticmethod
    def _encoded(handler: Handler, value: Any) -> Encoded | None:
        """The return value as its result keeps it; None when the handler keeps none."""
        return None if handler.keep_result_s is None else encode(value)

    def _kept(self, handler: Handler, encoded: Encoded | None) -> Kept | None:
        """The result an ack of the task writes, if its handler keeps results; a value
        that cannot be kept is warned of once per handler (its results say why)."""
        if handler.keep_result_s is None or encoded is None:
            return None
        kept = Kept.of(encoded, handler.keep_result_s, self.app.client.config.max_payload_bytes)
        if kept.error is not None and handler.fn not in self._unkept:
            self._unkept.add(handler.fn)
            log.warning("%r returned a value its result cannot keep (%s): the tasks still "
                        "succeed, and their results hold this error instead of the value",
                        handler.fn, kept.error.removeprefix(NOT_KEPT))
        return kept

    def _isolatable(self, handler: Handler) -> isolation.Ref | None:
        """Where a child process finds ``handler``; None (warned once) when it cannot, and
        the suspect then runs in the worker like any task."""
        ref = isolation.ref_of(handler.fn, handler.raw)
        if ref is None and handler.fn not in self._not_isolatable:
            self._not_isolatable.add(handler.fn)
            log.warning("suspect tasks of %r run in the worker beside the others: a handler "
                        "defined inside a function cannot run in a process of its own "
                        "(define it at a module's top level)", handler.fn)
        return ref

    def _failed(self, task: Task, exc: BaseException, *, dead: bool) -> Outcome:
        _traced_failure(exc)
        self._warn(task, exc, dead=dead)
        return Outcome(task, ok=False, error=describe(exc), dead=dead)

    def _warn(self, task: Task, exc: BaseException, *, dead: bool) -> None:
        """Log a failure: what became of the task, and why.  One line per queue, error
        type and message every few seconds at most, and a few lines per queue."""
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
        log.warning("%s%s%s", self._fate(task, exc, dead=dead), more,
                    f" trace_id={trace_id}" if trace_id else "",
                    extra={**fields, "trace_id": trace_id} if trace_id else fields)

    def _fate(self, task: Task, exc: BaseException, *, dead: bool) -> str:
        """What became of a failed task, with the error: dead-lettered at once (no
        handler), dead (``Fail``, or its last attempt), or retried when."""
        if isinstance(exc, NoHandler):
            return f"task {task.id} dead-lettered: {exc}"
        run = f"task {task.id} (queue {task.queue}, attempt {task.attempts}/{task.max_attempts})"
        error = f"{type(exc).__name__}: {exc}"
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


def _traced_failure(exc: BaseException) -> None:
    """Tell the tracer, if any, that the handler whose span is current failed."""
    tracer = tracing.tracer
    if tracer is not None:
        tracer.failed(exc)


def duration(seconds: float) -> str:
    """Seconds as a person reads them: ``0.2s``, ``1.5min``, ``2h``."""
    if seconds < 60:
        return f"{seconds:.3g}s"
    if seconds < 3600:
        return f"{seconds / 60:.3g}min"
    return f"{seconds / 3600:.3g}h"


async def _with_context(context: Context, coroutine: Any) -> Any:
    token = bind(context)
    try:
        return await coroutine
    finally:
        unbind(token)
