"""Handler slots: threads that take claimed tasks from the buffer and run their handlers.

Sync handlers run in the slot's thread; async handlers run on one shared event
loop while the slot waits for them, so ``concurrency`` bounds both kinds.
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

from shardq.app import App
from shardq.handler import Context, Fail, Retry, bind, unbind
from shardq.worker.completer import Outcome
from shardq.worker.metrics import Metrics

log = logging.getLogger("shardq.worker")

MAX_ERROR_CHARS = 4000
TAKE_TIMEOUT_S = 0.1


def describe(exc: BaseException) -> str:
    """The error text stored with a failed task: type, message and the traceback's tail."""
    text = "".join(traceback.format_exception(exc))
    return text[-MAX_ERROR_CHARS:]


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

    def __init__(self, app: App, buffer: queue_module.SimpleQueue[Context], *, concurrency: int,
                 report: Callable[[Context, Outcome], None], taken: Callable[[], None],
                 metrics: Metrics) -> None:
        self.app, self.buffer, self.report, self.taken = app, buffer, report, taken
        self.metrics = metrics
        self._stop = threading.Event()
        self._running: dict[int, Context] = {}
        self._durations: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._events = EventLoopThread()
        self._threads = [threading.Thread(target=self._serve, name=f"shardq-slot-{i}",
                                          daemon=True) for i in range(concurrency)]

    def start(self) -> None:
        """Start the slot threads."""
        for thread in self._threads:
            thread.start()

    def running(self) -> list[Context]:
        """Contexts of the tasks whose handlers are running now."""
        with self._lock:
            return list(self._running.values())

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

    def _serve(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            try:
                context = self.buffer.get(timeout=TAKE_TIMEOUT_S)
            except queue_module.Empty:
                continue
            self.taken()
            with self._lock:
                self._running[me] = context
            try:
                self.report(context, self._run(context))
            finally:
                with self._lock:
                    self._running.pop(me, None)

    def _run(self, context: Context) -> Outcome:
        task = context.task
        start = time.perf_counter()
        token = bind(context)
        try:
            handler = self.app.resolve(task)
            if handler.is_async:
                result: Any = handler.call(task.payload)
                context.future = asyncio.run_coroutine_threadsafe(
                    _with_context(context, result), self._events.loop)
                context.future.result()
            else:
                handler.call(task.payload)
            return Outcome(task, ok=True)
        except Retry as exc:
            return Outcome(task, ok=False, error=str(exc), retry_in_s=exc.in_s)
        except Fail as exc:
            return self._failed(task, exc, dead=True)
        except BaseException as exc:  # a handler's failure is the task's
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return self._failed(task, exc, dead=False)
        finally:
            unbind(token)
            duration = self._durations.get(task.queue)
            if duration is None:  # labels() looks the child up under a lock every time
                duration = self._durations[task.queue] = self.metrics.duration.labels(task.queue)
            duration.observe(time.perf_counter() - start)

    def _failed(self, task: Any, exc: BaseException, *, dead: bool) -> Outcome:
        log.warning("task %s (queue %s, attempt %d/%d) failed: %s: %s", task.id, task.queue,
                    task.attempts, task.max_attempts, type(exc).__name__, exc,
                    extra={"task_id": task.id, "queue": task.queue, "attempt": task.attempts,
                           "error": type(exc).__name__})
        return Outcome(task, ok=False, error=describe(exc), dead=dead)


async def _with_context(context: Context, coroutine: Any) -> Any:
    token = bind(context)
    try:
        return await coroutine
    finally:
        unbind(token)
