"""Handler slots: threads that take claimed tasks from the buffer and run their handlers.

Sync handlers run in the slot's thread; async handlers run on one shared event
loop while the slot waits for them, so ``concurrency`` bounds both kinds.  A suspect
task runs alone (:mod:`shardq.worker.isolation`).
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

from shardq.app import App, NoHandler
from shardq.handler import Context, Fail, Retry, bind, unbind
from shardq.validate import error_text
from shardq.worker.buffer import Buffer
from shardq.worker.completer import Outcome
from shardq.worker.isolation import Gate
from shardq.worker.logs import RateLimit
from shardq.worker.metrics import Metrics

log = logging.getLogger("shardq.worker")

TAKE_TIMEOUT_S = 0.1
# Weight of the newest handler duration in the moving average (about the last 20 runs).
DURATION_WEIGHT = 0.05
MIN_DURATION_S = 1e-6


def describe(exc: BaseException) -> str:
    """The error text stored with a failed task: its traceback, made storable by
    :func:`shardq.validate.error_text` (passwords masked, NULs removed, cut to size)."""
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
                 metrics: Metrics, gate: Gate) -> None:
        self.app, self.buffer, self.report, self.taken = app, buffer, report, taken
        self.concurrency = concurrency
        self._mean_s: float | None = None  # handler durations, a moving average
        self.gate = gate
        self._stop = threading.Event()
        # What each slot runs now, and since when (None: idle).  Each slot writes only
        # its own entry, with one assignment, and readers copy the list: no lock on
        # the path every task takes.
        self._now: list[tuple[Context, float] | None] = [None] * concurrency
        self._recorders = [metrics.durations.recorder() for _ in range(concurrency)]
        self._warnings = RateLimit()
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
        exclusive = context.task.suspect
        self.gate.enter(exclusive)
        try:
            # None if given back while it waited at the gate.
            return None if context.cancelled else self._run(me, context)
        finally:
            self.gate.leave(exclusive)
            self._now[me] = None

    def _run(self, me: int, context: Context) -> Outcome:
        task = context.task
        start = time.perf_counter()
        try:
            handler = self.app.resolve(task)
        except NoHandler as exc:
            # Dead at once: another attempt would find no handler either, and a worker
            # of another app is not meant to share this queue.
            self._warn(task, exc)
            return Outcome(task, ok=False, error=error_text(str(exc)), dead=True)
        token = bind(context)
        try:
            if handler.is_async:
                result: Any = handler.call(task.payload)
                context.future = asyncio.run_coroutine_threadsafe(
                    _with_context(context, result), self._events.loop)
                context.future.result()
            else:
                handler.call(task.payload)
            return Outcome(task, ok=True)
        except Retry as exc:
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

    def _failed(self, task: Any, exc: BaseException, *, dead: bool) -> Outcome:
        self._warn(task, exc)
        return Outcome(task, ok=False, error=describe(exc), dead=dead)

    def _warn(self, task: Any, exc: BaseException) -> None:
        """Log a failure; one line per queue and error type every few seconds at most."""
        held = self._warnings.allow((task.queue, type(exc).__name__))
        if held is None:
            return
        more = (f" ({held} more {type(exc).__name__} failure(s) on this queue were not logged "
                f"in the last {self._warnings.interval_s:g}s)") if held else ""
        log.warning("task %s (queue %s, attempt %d/%d) failed: %s: %s%s", task.id, task.queue,
                    task.attempts, task.max_attempts, type(exc).__name__, exc, more,
                    extra={"task_id": task.id, "queue": task.queue, "attempt": task.attempts,
                           "error": type(exc).__name__})


async def _with_context(context: Context, coroutine: Any) -> Any:
    token = bind(context)
    try:
        return await coroutine
    finally:
        unbind(token)
